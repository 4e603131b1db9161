#include "scheduler/task_tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <set>
#include <stdexcept>

#include "ir/lower_passes.h"
#include "scheduler/measured_programs.h"
#include "search/space.h"
#include "support/clock.h"
#include "support/format_bytes.h"
#include "support/json_read.h"
#include "te/flops.h"
#include "te/te.h"

namespace kiln::scheduler {

namespace {

// A record()'s label for a candidate the infrastructure failed to measure (errors are
// 0: evidence against the program; this is none).
constexpr double kNotMeasured = -1;

// A re-timing on another runner this far from the first measurement (either way) is
// more than noise between two boards of one kind.
constexpr double kDisagreement = 1.25;

double mean(const std::vector<double> &v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

ir::Trace sketch_of(const ir::Trace &full, size_t n) {
  ir::Trace t;
  n = std::min(n, full.instructions.size());
  t.instructions.assign(full.instructions.begin(), full.instructions.begin() + static_cast<long>(n));
  for (const auto &[i, d] : full.decisions)
    if (i < n) t.decisions[i] = d;
  return t;
}

costmodel::GpuLimits gpu_limits_of(const Target &target) {
  costmodel::GpuLimits limits;
  limits.warp_size = target.warp_size;
  limits.max_threads_per_sm = target.max_threads_per_sm;
  limits.max_blocks_per_sm = target.max_blocks_per_sm;
  limits.shared_memory_per_sm_bytes = target.shared_memory_per_sm_bytes;
  limits.registers_per_sm = target.registers_per_sm;
  limits.sm_count = target.sm_count;
  return limits;
}

TaskTuner::TaskTuner(ops::Workload workload, Target target, TuneOptions options, db::Database *database,
                     measure::Builder &builder, measure::Runner &runner, costmodel::CostModel &model)
    : workload_(std::move(workload)),
      target_(std::move(target)),
      options_(options),
      db_(database),
      builder_(builder),
      runner_(runner),
      model_(model) {
  if (target_.backend().is_gpu()) gpu_limits_ = gpu_limits_of(target_);
  te::ComputeDAG dag = workload_.build_dag();
  func_ = te::lower(dag, workload_.ops.size() == 1 ? workload_.ops[0].op : "fused");
  // Before anything whose work grows with the extents (the search space's sampling).
  refuse_buffers_over_the_memory_limit();
  flops_ = te::estimate_flops(dag);
  std::string shapes;
  for (const ir::TensorType &t : workload_.inputs) {
    if (!shapes.empty()) shapes += ",";
    for (size_t d = 0; d < t.shape.size(); ++d) shapes += (d ? "x" : "") + std::to_string(t.shape[d]);
  }
  workload_record_ = db::Workload{workload_.key_hash(), workload_.canonical_string(), workload_.summary(), shapes};
  search_ = std::make_unique<search::EvolutionarySearch>(
      func_, options_.space ? *options_.space : search::default_search_space(target_), options_.evolution,
      options_.seed);
}

void TaskTuner::resume_from_database() {
  if (!db_) return;
  std::vector<costmodel::ProgramFeatures> features;
  std::vector<double> labels;
  std::string canonical_target = target_.str();
  std::vector<db::Record> records = db_->records_of(workload_.key_hash(), &passed_over_records_);
  size_t other_protocol = 0;
  for (const db::Record &r : records)
    if (r.target == canonical_target && r.ok() && timed_with_flushed_args(r) != options_.timing.flush_args)
      ++other_protocol;
  if (other_protocol != 0) {
    const bool flushed = options_.timing.flush_args;
    throw std::runtime_error("the database holds " + std::to_string(other_protocol) + " records of " +
                             workload_.summary() + " on " + canonical_target + " timed " +
                             (flushed ? "with hot caches (without --flush-args)" : "with --flush-args") +
                             "; latencies of the two protocols cannot be ranked together: tune into another --db, or " +
                             (flushed ? "drop --flush-args" : "pass --flush-args"));
  }
  for (const db::Record &r : records) {
    if (r.target != canonical_target) continue;
    ir::Trace full;
    ir::PrimFunc program;
    try {
      full = ir::Trace::from_json(kiln::support::parse_json(r.trace_json));
      program = ir::Schedule::replay(func_, full).func();
    } catch (const std::exception &) {
      continue;  // a record this Kiln cannot replay: not ours to resume
    }
    size_t n = full.instructions.size();
    if (r.metadata.sketch_instructions && *r.metadata.sketch_instructions >= 0)
      n = std::min(n, static_cast<size_t>(*r.metadata.sketch_instructions));
    double latency = label_latency(r, LatencyLabel::kAnchoredMean);
    double label = label_latency(r);
    search_->add_measured(sketch_of(full, n), program, full.to_json().dump(), label > 0 ? 1.0 / label : 0);
    features.push_back(costmodel::extract_features(program, gpu_limits()));
    labels.push_back(label);
    if (latency > 0 && (progress_.best_seconds == 0 || latency < progress_.best_seconds)) {
      progress_.best_seconds = latency;
      best_trace_ = r.trace_json;
      best_sketch_ = sketch_of(full, n);
      next_anchor_ = Anchor{program, "", 0};  // built with the first round's candidates
    }
  }
  progress_.resumed_records = static_cast<int64_t>(features.size());
  // Measurements carry their task, so that one model can learn from several tasks' tuners.
  std::vector<std::string> tasks(features.size(), workload_.key_hash());
  if (!features.empty()) model_.update({std::move(features), costmodel::throughputs_of(labels), std::move(tasks)});
}

void TaskTuner::warm_start_from_other_tasks() {
  if (!db_) return;
  double t0 = support::now_seconds();
  LoadOptions load;
  load.skip_workload = workload_.key_hash();
  load.max_per_task = options_.warm_start_per_task;
  load.flush_args = options_.timing.flush_args;
  MeasuredPrograms other = load_measured_programs(*db_, target_.str(), load);
  if (other.programs.empty()) return;
  std::vector<costmodel::ProgramFeatures> features =
      costmodel::extract_features_batch(other.programs, options_.feature_threads, gpu_limits());
  progress_.time.features += support::now_seconds() - t0;
  t0 = support::now_seconds();
  model_.warm_start({std::move(features), costmodel::throughputs_of(other.latencies), other.tasks});
  progress_.time.training += support::now_seconds() - t0;
  progress_.warm_start_programs = static_cast<int64_t>(other.programs.size());
}

// Tuners of several tasks share one builder's folder: names carry the task.
std::string TaskTuner::artifact_name(const std::string &what) const {
  return workload_.key_hash().substr(0, 16) + "_" + what;
}

// Every candidate of a task whose buffers do not fit the runner fails the same way, and
// its error records would count against programs that did nothing wrong.
void TaskTuner::refuse_buffers_over_the_memory_limit() const {
  const int64_t limit = runner_.memory_limit_bytes();
  if (limit <= 0) return;
  int64_t total = 0;
  bool overflow = false;
  for (const ir::Buffer &buffer : func_.params) {
    int64_t bytes = 0;
    overflow = overflow || __builtin_mul_overflow(buffer->num_elements(), ir::dtype_bytes(buffer->dtype), &bytes) ||
               __builtin_add_overflow(total, bytes, &total);
  }
  if (!overflow && total <= limit) return;
  throw std::runtime_error(
      workload_.summary() + " needs " + (overflow ? std::string("more than 8 EiB") : support::format_bytes(total)) +
      " for its inputs and outputs alone, more than one run may add on this runner (" + support::format_bytes(limit) +
      "); give a smaller shape, or raise --memory-limit-mb if the machine has the memory");
}

void TaskTuner::prepare() {
  start_ = support::now_seconds();
  if (options_.warm_start) warm_start_from_other_tasks();
  resume_from_database();
  if (progress_.best_seconds > 0) progress_.best_gflops = flops_ / progress_.best_seconds / 1e9;
  // A task's first batch measures the untuned default, so that a task given few trials
  // (one of many, a dynamic dimension's buckets) never ends slower than untuned. It is a
  // program of the default space only: a search space of the caller's own may not hold it.
  if (progress_.resumed_records == 0 && !options_.space)
    if (std::optional<search::Candidate> untuned = search::untuned_candidate(func_, target_))
      search_->offer_first(std::move(*untuned));
  // The unscheduled program, built once, is every candidate's correctness reference; a
  // GPU cannot run it unbound, so there the untuned GPU program is.
  double t0 = support::now_seconds();
  ir::PrimFunc reference = target_.backend().is_gpu() ? search::untuned_schedule(func_, target_) : func_;
  std::vector<measure::BuildResult> ref =
      builder_.build({measure::BuildInput{reference, target_, artifact_name("reference")}});
  progress_.time.build += support::now_seconds() - t0;
  if (!ref[0].ok()) throw std::runtime_error("cannot build the reference program: " + ref[0].message);
  reference_artifact_ = ref[0].artifact_path;
}

bool TaskTuner::run_round(int n) {
  std::vector<search::Candidate> batch = propose(n);
  if (batch.empty()) return false;  // the space is exhausted
  Measured measured = build_and_run(batch);
  std::vector<double> labels = record(batch, measured);
  train(batch, labels);
  ++progress_.round;
  progress_.elapsed_seconds = support::now_seconds() - start_;
  return true;
}

std::vector<search::Candidate> TaskTuner::propose(int n) {
  double t0 = support::now_seconds();
  double featurizing = 0;  // counted under features, not twice
  search::Scorer scorer = [&](const std::vector<ir::PrimFunc> &funcs) {
    double f0 = support::now_seconds();
    std::vector<costmodel::ProgramFeatures> feats =
        costmodel::extract_features_batch(funcs, options_.feature_threads, gpu_limits());
    featurizing += support::now_seconds() - f0;
    std::vector<float> p = model_.predict(feats);
    return std::vector<double>(p.begin(), p.end());
  };
  // Candidates the infrastructure failed to measure go first; the search fills the rest.
  const auto retried = static_cast<std::ptrdiff_t>(std::min(retry_.size(), static_cast<size_t>(std::max(n, 0))));
  std::vector<search::Candidate> batch(std::make_move_iterator(retry_.begin()),
                                       std::make_move_iterator(retry_.begin() + retried));
  retry_.erase(retry_.begin(), retry_.begin() + retried);
  if (static_cast<int>(batch.size()) < n) {
    std::vector<search::Candidate> fresh =
        search_->next_batch(n - static_cast<int>(batch.size()), scorer, model_.ready());
    batch.insert(batch.end(), std::make_move_iterator(fresh.begin()), std::make_move_iterator(fresh.end()));
  }
  progress_.time.features += featurizing;
  progress_.time.search += support::now_seconds() - t0 - featurizing;
  return batch;
}

// A batch measured beside its builds is built in up to this many parts of at least
// kMinPipelinedPart candidates (4 parts: the builds of three hide behind runs).
constexpr size_t kPipelineParts = 4, kMinPipelinedPart = 4;

TaskTuner::Measured TaskTuner::build_and_run(const std::vector<search::Candidate> &batch) {
  std::vector<measure::BuildInput> builds;
  for (size_t i = 0; i < batch.size(); ++i)
    builds.push_back(
        measure::BuildInput{batch[i].func, target_, artifact_name("c" + std::to_string(progress_.trials + i))});
  // The anchor and its successor are timed after the candidates; a resumed best is
  // built with them.
  std::vector<std::optional<Anchor> *> anchors;
  if (options_.anchor_rounds && runner_.times_batch_together()) {
    for (std::optional<Anchor> *a : {&anchor_, &next_anchor_})
      if (*a) anchors.push_back(a);
  }
  std::vector<std::optional<Anchor> *> unbuilt;
  for (std::optional<Anchor> *a : anchors) {
    if (!(*a)->artifact.empty()) continue;
    unbuilt.push_back(a);
    builds.push_back(
        measure::BuildInput{(*a)->program, target_, artifact_name("anchor" + std::to_string(progress_.trials))});
  }
  // Where timing does not use this host's cores (a GPU, another machine), the batch is
  // built in parts and each part is built while the one before it runs: builds are
  // most of a GPU trial's time (Ansor: about 2.7 s per trial). A local CPU runner
  // builds everything first, so that no build disturbs its timing.
  const size_t total = builds.size();
  const size_t parts = runner_.timing_shares_host_cores() || batch.size() < 2 * kMinPipelinedPart
                           ? 1
                           : std::min<size_t>(kPipelineParts, batch.size() / kMinPipelinedPart);
  auto part_begin = [&](size_t p) { return p == parts ? total : p * batch.size() / parts; };
  auto build_part = [this, &builds, &part_begin](size_t p, double *seconds) {
    const double start = support::now_seconds();
    std::vector<measure::BuildResult> out = builder_.build(
        std::vector<measure::BuildInput>(builds.begin() + static_cast<std::ptrdiff_t>(part_begin(p)),
                                         builds.begin() + static_cast<std::ptrdiff_t>(part_begin(p + 1))));
    *seconds = support::now_seconds() - start;
    return out;
  };
  Measured m;
  std::vector<measure::RunResult> ran;
  std::vector<size_t> run_index;
  double built_seconds = 0;
  std::vector<measure::BuildResult> current = build_part(0, &built_seconds);
  progress_.time.build += built_seconds;
  for (size_t p = 0; p < parts; ++p) {
    const size_t first = m.built.size();
    m.built.insert(m.built.end(), std::make_move_iterator(current.begin()), std::make_move_iterator(current.end()));
    double next_seconds = 0;
    std::future<std::vector<measure::BuildResult>> next;
    if (p + 1 < parts) next = std::async(std::launch::async, build_part, p + 1, &next_seconds);
    if (p + 1 == parts) {
      // Anchors (a single part: runners that time a batch together share the host)
      // were built last, after the candidates.
      for (size_t k = unbuilt.size(); k-- > 0; m.built.pop_back()) {
        if (m.built.back().ok())
          (*unbuilt[k])->artifact = m.built.back().artifact_path;
        else
          unbuilt[k]->reset();  // a later best takes its place
      }
      std::erase_if(anchors, [](const std::optional<Anchor> *a) { return !a->has_value(); });
    }
    std::vector<measure::RunInput> runs;
    for (size_t i = first; i < m.built.size(); ++i) {
      if (!m.built[i].ok()) continue;
      measure::RunInput in = run_input(m.built[i].artifact_path);
      if (options_.give_up_factor > 0 && progress_.best_seconds > 0)
        in.timing.give_up_after_seconds = options_.give_up_factor * progress_.best_seconds;
      runs.push_back(in);
      run_index.push_back(i);
    }
    if (p + 1 == parts)
      for (std::optional<Anchor> *a : anchors) runs.push_back(run_input((*a)->artifact));  // never given up on
    double t0 = support::now_seconds();
    std::vector<measure::RunResult> part_ran = runner_.run(runs);
    progress_.time.run += support::now_seconds() - t0;
    ran.insert(ran.end(), std::make_move_iterator(part_ran.begin()), std::make_move_iterator(part_ran.end()));
    if (next.valid()) {
      t0 = support::now_seconds();
      current = next.get();
      const double waited = support::now_seconds() - t0;
      progress_.time.build += waited;
      progress_.time.overlapped += std::max(0.0, next_seconds - waited);
    }
  }
  // Medians of the anchors' repeats: one disturbed repeat would scale the whole round.
  std::vector<double> anchor_seconds(anchors.size());
  for (size_t k = anchors.size(); k-- > 0; ran.pop_back())
    anchor_seconds[k] = ran.back().ok() ? median(ran.back().repeat_seconds) : 0;
  for (size_t k = 0; k < anchors.size(); ++k) {
    if (anchors[k] == &anchor_ && anchor_seconds[k] > 0) m.anchor_ratio = anchor_seconds[k] / anchor_->latency;
    if (anchors[k] == &next_anchor_ && anchor_seconds[k] > 0) {
      // Without an anchor yet, this re-timing sets the task's scale.
      next_anchor_->latency = anchor_seconds[k] / (m.anchor_ratio > 0 ? m.anchor_ratio : 1);
      anchor_ = std::move(next_anchor_);
      next_anchor_.reset();
    }
  }
  m.ran.resize(batch.size());
  for (size_t k = 0; k < run_index.size(); ++k) m.ran[run_index[k]] = std::move(ran[k]);
  return m;
}

// The layouts a program reads its constant inputs in (ir/layout_rewrite.h): what a
// compiler using the record packs once; derived again from the trace when it is built.
static nlohmann::json packed_inputs_json(const ir::PrimFunc &scheduled) {
  nlohmann::json out = nlohmann::json::array();
  for (const ir::PackedInput &p : ir::packed_inputs(scheduled))
    out.push_back({{"input", p.param}, {"shape", p.packed->shape}});
  return out;
}

std::vector<double> TaskTuner::record(const std::vector<search::Candidate> &batch, const Measured &m) {
  std::vector<db::Record> records;
  std::vector<double> labels;
  if (m.anchor_ratio > 0) {
    ++progress_.anchored_rounds;
    progress_.last_anchor_ratio = m.anchor_ratio;
  }
  std::optional<size_t> new_best;
  for (size_t i = 0; i < batch.size(); ++i) {
    std::string trace_json = batch[i].trace.to_json().dump();
    if (m.built[i].ok() && m.ran[i] && m.ran[i]->error == measure::ErrorKind::kInfrastructure) {
      // The measurement failed, not the program: nothing stored or learned; measured again
      // in a later round, a few times at most.
      ++progress_.trials;
      ++progress_.infrastructure_failures;
      if (++infrastructure_failures_[trace_json] < kInfrastructureRetries) retry_.push_back(batch[i]);
      labels.push_back(kNotMeasured);
      continue;
    }
    db::Record rec;
    rec.workload = workload_record_;
    rec.target = target_.str();
    rec.trace_json = std::move(trace_json);
    db::RecordMetadata &meta = rec.metadata;
    meta.sketch_instructions = static_cast<int64_t>(batch[i].sketch.instructions.size());
    meta.build_seconds = m.built[i].build_seconds;
    if (!batch[i].func.constant_params.empty()) meta.packed_inputs = packed_inputs_json(batch[i].func);
    meta.adopted = batch[i].adopted;
    meta.fitted = batch[i].fitted;
    meta.flush_args = options_.timing.flush_args;
    meta.pipeline = options_.pipeline;
    double latency = 0;  // competes for the best and is stored
    double label = 0;    // guides the search
    if (!m.built[i].ok()) {
      rec.outcome = db::MeasureError{m.built[i].error, m.built[i].message};
    } else {
      const measure::RunResult &r = *m.ran[i];
      meta.number = r.number;
      meta.run_seconds = r.run_seconds;
      if (!r.measured_by.empty()) meta.measured_by = kiln::support::parse_json_or_discarded(r.measured_by);
      if (meta.measured_by.is_discarded()) meta.measured_by = nullptr;
      if (m.anchor_ratio > 0) meta.anchor_ratio = m.anchor_ratio;
      if (r.ok()) {
        rec.outcome = r.repeat_seconds;
        // As a resumed job reads the record back: the same numbers whether tuned now or then.
        latency = label_latency(r.repeat_seconds, m.anchor_ratio, LatencyLabel::kAnchoredMean);
        label = label_latency(r.repeat_seconds, m.anchor_ratio);
      } else {
        rec.outcome = db::MeasureError{r.error, r.message};
      }
    }
    records.push_back(rec);
    search_->add_measured(batch[i].sketch, batch[i].func, rec.trace_json, label > 0 ? 1.0 / label : 0);
    ++progress_.trials;
    if (latency <= 0) ++progress_.errors;
    if (batch[i].adopted) ++progress_.adopted;
    if (latency > 0 && !db_) measured_.emplace_back(latency, rec.trace_json);
    if (latency > 0 && (progress_.best_seconds == 0 || latency < progress_.best_seconds)) {
      progress_.best_seconds = latency;
      best_trace_ = rec.trace_json;
      best_sketch_ = batch[i].sketch;
      new_best = i;
      if (batch[i].adopted) ++progress_.adopted_best;
    }
    progress_.best_gflops = progress_.best_seconds > 0 ? flops_ / progress_.best_seconds / 1e9 : 0;
    best_gflops_curve_.push_back(progress_.best_gflops);
    labels.push_back(label);
  }
  if (new_best) next_anchor_ = Anchor{batch[*new_best].func, m.built[*new_best].artifact_path, 0};
  double t0 = support::now_seconds();
  if (db_) db_->commit(records);
  progress_.time.database += support::now_seconds() - t0;
  return labels;
}

// The model relabels everything against the best at every update.
void TaskTuner::train(const std::vector<search::Candidate> &batch, const std::vector<double> &labels) {
  double t0 = support::now_seconds();
  std::vector<ir::PrimFunc> funcs;
  std::vector<double> measured;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (labels[i] == kNotMeasured) continue;  // the infrastructure failed it: no evidence
    funcs.push_back(batch[i].func);
    measured.push_back(labels[i]);
  }
  if (funcs.empty()) return;
  std::vector<costmodel::ProgramFeatures> feats =
      costmodel::extract_features_batch(funcs, options_.feature_threads, gpu_limits());
  progress_.time.features += support::now_seconds() - t0;
  t0 = support::now_seconds();
  std::vector<std::string> tasks(feats.size(), workload_.key_hash());
  model_.update({std::move(feats), costmodel::throughputs_of(measured), std::move(tasks)});
  progress_.time.training += support::now_seconds() - t0;
}

TuneResult TaskTuner::finish(bool confirm) {
  TuneResult result;
  if (confirm) result.confirmed = confirm_best(start_, result.disagreements);
  progress_.elapsed_seconds = support::now_seconds() - start_;
  result.progress = progress_;
  result.best_trace_json = best_trace_;
  result.best_gflops_curve = best_gflops_curve_;
  return result;
}

TuneResult TaskTuner::run(const std::function<void(const Progress &)> &on_round) {
  prepare();
  while (progress_.trials < options_.trials) {
    if (options_.time_limit_seconds > 0 && support::now_seconds() - start_ >= options_.time_limit_seconds) break;
    if (!run_round(static_cast<int>(std::min<int64_t>(options_.batch, options_.trials - progress_.trials)))) break;
    if (on_round) on_round(progress_);
  }
  return finish();
}

measure::RunInput TaskTuner::run_input(const std::string &artifact) const {
  measure::RunInput in;
  in.artifact_path = artifact;
  in.reference_artifact_path = reference_artifact_;
  in.timing = options_.timing;
  in.input_seed = options_.seed;
  return in;
}

// The runner id a record's timings come from (RecordMetadata::measured_by), "" if none.
static std::string runner_of(const db::Record &r) {
  const nlohmann::json &by = r.metadata.measured_by;
  return by.is_object() && by.contains("runner") && by["runner"].is_string() ? by["runner"].get<std::string>() : "";
}

namespace {

// max / min of positive timings (1 for fewer than two).
double spread(const std::vector<double> &seconds) {
  if (seconds.size() < 2) return 1;
  auto [low, high] = std::minmax_element(seconds.begin(), seconds.end());
  return *low > 0 ? *high / *low : 1;
}

}  // namespace

int TaskTuner::confirm_best(double started, std::vector<std::string> &disagreements) {
  if (options_.confirm_top <= 0 || options_.confirm_runs <= 0 || reference_artifact_.empty()) return 0;
  if (options_.time_limit_seconds > 0 && support::now_seconds() - started >= options_.time_limit_seconds) return 0;
  auto k = static_cast<size_t>(options_.confirm_top);
  std::vector<std::pair<double, std::string>> top;
  std::map<std::string, std::string> first_runner;  // trace -> the runner that measured it
  std::set<std::string> settles_dispute;            // traces disputed before: their re-timing is taken
  std::map<std::string, double> first_spread;       // trace -> max / min of its measurement's repeats
  if (db_) {
    // This target's records only: a sibling device's latencies compare with nothing here.
    // By this run's measurements: a program confirmed in an earlier run competes only
    // when its measurement still ranks it among the fastest.
    for (const db::Record &r :
         db_->top_k(workload_.key_hash(), target_.str(), k, db::TargetMatch::kExactOnly, db::Ranking::kMeasured)) {
      top.emplace_back(r.mean_latency(), r.trace_json);
      first_runner[r.trace_json] = runner_of(r);
      first_spread[r.trace_json] = spread(r.latencies());
    }
    // The incumbent (the best of the last confirmation) is re-timed beside them.
    std::optional<db::Record> incumbent = db_->best(workload_.key_hash(), target_.str(), db::TargetMatch::kExactOnly);
    if (incumbent && incumbent->confirmed_latency &&
        std::none_of(top.begin(), top.end(), [&](const auto &t) { return t.second == incumbent->trace_json; }))
      top.emplace_back(incumbent->mean_latency(), incumbent->trace_json);
    // Programs an earlier confirmation disputed are re-timed: the re-timing settles them.
    for (const db::Record &r : db_->disputed_records(workload_.key_hash(), target_.str())) {
      if (std::any_of(top.begin(), top.end(), [&](const auto &t) { return t.second == r.trace_json; })) continue;
      top.emplace_back(r.mean_latency(), r.trace_json);
      first_runner[r.trace_json] = runner_of(r);
      first_spread[r.trace_json] = spread(r.latencies());
      settles_dispute.insert(r.trace_json);
    }
  } else {
    std::sort(measured_.begin(), measured_.end());
    top.assign(measured_.begin(), measured_.begin() + static_cast<std::ptrdiff_t>(std::min(k, measured_.size())));
  }
  if (top.size() < 2) return 0;
  double t0 = support::now_seconds();
  std::vector<measure::BuildInput> builds;
  std::vector<size_t> program_of_build;
  for (size_t i = 0; i < top.size(); ++i) {
    ir::PrimFunc program;
    try {
      program = ir::Schedule::replay(func_, ir::Trace::from_json(kiln::support::parse_json(top[i].second))).func();
    } catch (const std::exception &) {
      continue;  // not replayable by this Kiln: it keeps its single measurement
    }
    builds.push_back(measure::BuildInput{program, target_, artifact_name("confirm" + std::to_string(i))});
    program_of_build.push_back(i);
  }
  std::vector<measure::BuildResult> built = builder_.build(builds);
  progress_.time.build += support::now_seconds() - t0;
  // Run means per program. All programs are timed in each run before any is timed
  // again, so slow host drift falls on all of them alike. The first measurement is left
  // out: it is what put the program among the fastest, so it leans low.
  std::vector<std::vector<double>> runs(top.size());
  std::vector<std::set<std::string>> retimed_on(top.size());
  std::vector<measure::RunInput> inputs;
  std::vector<size_t> program_of_input;
  for (size_t b = 0; b < built.size(); ++b) {
    if (!built[b].ok()) continue;
    inputs.push_back(run_input(built[b].artifact_path));
    // On another device of the key than the first measurement's, where there is one: a
    // board that times fast (or wrongly) cannot confirm its own figures.
    inputs.back().avoid_runner = first_runner[top[program_of_build[b]].second];
    program_of_input.push_back(program_of_build[b]);
  }
  t0 = support::now_seconds();
  for (int r = 0; r < options_.confirm_runs; ++r) {
    std::vector<measure::RunResult> ran = runner_.run(inputs);
    for (size_t j = 0; j < ran.size(); ++j) {
      if (!ran[j].ok()) continue;
      runs[program_of_input[j]].push_back(mean(ran[j].repeat_seconds));
      nlohmann::json by = kiln::support::parse_json_or_discarded(ran[j].measured_by);
      if (by.is_object() && by.contains("runner") && by["runner"].is_string())
        retimed_on[program_of_input[j]].insert(by["runner"].get<std::string>());
    }
  }
  progress_.time.run += support::now_seconds() - t0;
  double best = 0;
  std::vector<db::Record> confirmations;
  std::vector<std::pair<std::string, std::string>> disputes;  // trace, why
  for (size_t i = 0; i < top.size(); ++i) {
    const std::vector<double> &v = runs[i];
    if (v.empty()) continue;  // never re-timed: no confirmed figure to compare
    double confirmed = median(v);
    // Two devices of one key disagreeing beyond timing noise: one of them is not what
    // the key says (another clock, a thermal limit, another part), which the records
    // must not hide. The program's figure is disputed: stored so, and used for nothing
    // until a later confirmation re-times it (which settles it).
    const std::string &first = first_runner[top[i].second];
    if (!first.empty() && !retimed_on[i].empty() && !retimed_on[i].count(first) && top[i].first > 0 &&
        !settles_dispute.count(top[i].second)) {
      double ratio = confirmed / top[i].first;
      // Beyond the noise either side shows in its own repeats: a microsecond kernel on a
      // busy host varies by more than kDisagreement from one repeat to the next.
      double noise = std::max({1.0, first_spread[top[i].second], spread(v)});
      if (ratio > kDisagreement * noise || ratio < 1 / (kDisagreement * noise)) {
        std::string others;
        for (const std::string &id : retimed_on[i]) others += (others.empty() ? "" : ", ") + id;
        char line[512];
        std::snprintf(line, sizeof line,
                      "%s: a program measured %.4f ms on runner %s was re-timed at %.4f ms on %s (%.2fx): the "
                      "key's runners disagree beyond noise; check that they are one kind of device",
                      workload_.summary().c_str(), top[i].first * 1e3, first.c_str(), confirmed * 1e3, others.c_str(),
                      ratio);
        disagreements.push_back(line);
        disputes.emplace_back(top[i].second, line);
        continue;
      }
    }
    if (best == 0 || confirmed < best) {
      best = confirmed;
      best_trace_ = top[i].second;
    }
    // Stored records keep their measurement and gain the confirmation (db::Database::commit).
    db::Record rec;
    rec.workload = workload_record_;
    rec.target = target_.str();
    rec.trace_json = top[i].second;
    rec.outcome = v;
    rec.confirmed_latency = confirmed;
    confirmations.push_back(std::move(rec));
  }
  if (db_ && !disputes.empty()) {
    t0 = support::now_seconds();
    for (const auto &[trace, why] : disputes) db_->mark_disputed(workload_.key_hash(), target_.str(), trace, why);
    progress_.time.database += support::now_seconds() - t0;
  }
  const auto retimed =
      static_cast<int>(std::count_if(runs.begin(), runs.end(), [](const auto &v) { return !v.empty(); }));
  if (best == 0) return retimed;  // every re-timed program disputed: the measured best stands
  if (db_ && !confirmations.empty()) {
    t0 = support::now_seconds();
    db_->commit_confirmation(confirmations);
    progress_.time.database += support::now_seconds() - t0;
  }
  progress_.best_seconds = best;
  progress_.best_gflops = flops_ / best / 1e9;
  return retimed;
}

}  // namespace kiln::scheduler
