// The tuning loop for one task: search -> build -> measure -> cost model -> database,
// round after round, until the trial or time budget is spent. Resumable: records
// already in the database seed the search and are never measured again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "database/database.h"
#include "measure/builder.h"
#include "measure/runner.h"
#include "ops/workload.h"
#include "search/evolutionary.h"

namespace kiln::scheduler {

struct TuneOptions {
  /// Measured trials for this run (records already in the database do not count).
  int64_t trials = 1000;
  /// Candidates built and measured per round.
  int batch = 32;
  /// Wall-clock budget in seconds; 0 = none.
  double time_limit_seconds = 0;
  uint64_t seed = 0;
  search::EvolutionOptions evolution;
  /// Rules, postprocessors and mutators; unset: search::default_search_space(target).
  std::optional<search::SearchSpace> space;
  /// Fewer and shorter repeats than a one-off measurement: tuning times hundreds of
  /// programs, and the confirmation (confirm_top) re-times the best ones.
  measure::TimingOptions timing = {.repeat = 3, .min_repeat_ms = 10};
  /// A candidate whose warm-up call and a second, warm look are both this many times
  /// slower than the best latency known is timed by that look alone
  /// (TimingOptions::give_up_after_seconds, measure/README.md step 2).
  /// 0 = always the full timing protocol.
  double give_up_factor = 3.0;
  /// When the runner times a batch together (measure::Runner::times_batch_together),
  /// every round re-times the task's best program beside its candidates: the anchor.
  /// Its time this round over its time on the task's scale says how fast the host ran
  /// for the whole batch, and the round's latencies are divided by that ratio before
  /// they label the cost model or compete for the best (scheduler/README.md, "Anchored
  /// rounds"). Records keep the raw timings and store the ratio. One or two extra runs
  /// per round. Off by default: on this project's shared 2-core hosts it did not make
  /// the labels easier to rank (bench/RESULTS.md, "Anchored rounds").
  bool anchor_rounds = false;
  /// The frontend pipeline options the task's workload was prepared with
  /// (frontend::PipelineOptions::to_json), stored in each record's metadata so that a
  /// compile prepared another way can tell; null for single operators.
  nlohmann::json pipeline;
  /// Threads for feature extraction.
  int feature_threads = 2;
  /// Before the first round, warm-start the cost model (CostModel::warm_start) with the
  /// database's records of other workloads for the same target (at most
  /// `warm_start_per_task` programs each), so that the first rounds are guided instead
  /// of random.
  bool warm_start = false;
  size_t warm_start_per_task = 256;
  /// After the last round, the `confirm_top` fastest programs known (this run's and the
  /// database's, for this exact target) are timed `confirm_runs` more times,
  /// interleaved, each run in a fresh process, and the best is the one with the lowest
  /// median over these re-timings (the first measurement, which leans low, left out;
  /// skipped once the time limit is reached). One timing can fall into a window where
  /// the host runs fast (on a shared machine the same program reads up to 1.5x apart
  /// minutes apart) and crown a program that is not the fastest. The previous
  /// confirmation's best is re-timed beside them; each re-timed program's median is
  /// stored as its record's confirmed latency (replacing the previous confirmation,
  /// db::Database::commit_confirmation), which database lookups rank first. 0 = the
  /// best single measurement wins.
  int confirm_top = 8;
  int confirm_runs = 3;
};

/// Where a round's time went, in seconds (cumulative over the run).
struct TimeBreakdown {
  double search = 0, features = 0, training = 0, build = 0, run = 0, database = 0;
  /// Builds that ran while the previous part of their batch was measured (a GPU or a
  /// remote runner: Runner::timing_shares_host_cores() false); not in `build`, which is
  /// the time the tuner waited for builds.
  double overlapped = 0;
};

struct Progress {
  int64_t trials = 0;  // measured in this run
  int64_t errors = 0;  // of those, failed builds/runs/checks
  int64_t round = 0;
  double best_seconds = 0;  // best latency known (this run or the database); 0 = none
  double best_gflops = 0;
  double elapsed_seconds = 0;
  /// Programs of other tasks the cost model was warm-started with (TuneOptions::warm_start).
  int64_t warm_start_programs = 0;
  /// Measurements that failed for the infrastructure's sake (a runner lost, the tracker
  /// failing): not stored, not evidence, their candidates measured again in a later
  /// round (up to kInfrastructureRetries times each).
  int64_t infrastructure_failures = 0;
  /// This task's own records (this target) the run resumed from the database.
  int64_t resumed_records = 0;
  /// Measured programs carried over from other tasks (TaskTuner::adopt), and how many
  /// of them became this task's best when measured.
  int64_t adopted = 0, adopted_best = 0;
  /// Rounds whose latencies were scaled by the anchor (TuneOptions::anchor_rounds), and
  /// the last ratio: the anchor's time that round over its time on the task's scale
  /// (above 1: the host ran slower than when the scale was set).
  int64_t anchored_rounds = 0;
  double last_anchor_ratio = 1;
  TimeBreakdown time;
};

struct TuneResult {
  Progress progress;
  std::string best_trace_json;  // empty when nothing valid was found
  /// Programs re-timed by the confirmation (TuneOptions::confirm_top); when non-zero,
  /// progress.best_seconds is the best program's median over its re-timings.
  int confirmed = 0;
  /// Programs whose re-timing on another runner of the key disagreed with their first
  /// measurement beyond noise, one line each (runners, latencies, ratio).
  std::vector<std::string> disagreements;
  /// Best GFLOP/s after each measured trial of this run (the best-so-far curve).
  std::vector<double> best_gflops_curve;
};

/// The limits a GPU program's occupancy features take from a cuda target.
costmodel::GpuLimits gpu_limits_of(const Target &target);

class TaskTuner {
 public:
  /// `database` may be null (nothing stored, nothing resumed).
  TaskTuner(ops::Workload workload, Target target, TuneOptions options, db::Database *database,
            measure::Builder &builder, measure::Runner &runner, costmodel::CostModel &model);

  /// Runs the loop (prepare, rounds until a budget is spent, finish); `on_round` is
  /// called after every round.
  TuneResult run(const std::function<void(const Progress &)> &on_round = {});

  // The loop's steps, for a scheduler that interleaves the rounds of several tasks.
  /// Warm start, resume from the database, build the reference. Once, first.
  void prepare();
  /// Searches, builds, measures, stores and trains on up to `n` candidates; false when
  /// the space has nothing new.
  bool run_round(int n);
  /// The confirmation of the best programs (TuneOptions::confirm_top; none when
  /// `confirm` is false) and the result.
  TuneResult finish(bool confirm = true);
  /// The sketch (with decisions) of the best program known; empty before one is.
  const ir::Trace &best_sketch() const { return best_sketch_; }
  /// Offers another task's program (its sketch with decisions) to this task's search
  /// (search::EvolutionarySearch::adopt); call after prepare().
  bool adopt(const ir::Trace &foreign_sketch) { return search_ && search_->adopt(foreign_sketch); }
  /// Programs adopted from other tasks and not measured yet.
  size_t pending_adopted() const { return search_ ? search_->num_adopted() : 0; }
  const Progress &progress() const { return progress_; }
  /// Why each record of this task the database could not read (damaged by another
  /// tool) was passed over when resuming; the caller warns.
  const std::vector<std::string> &passed_over_records() const { return passed_over_records_; }
  double flops() const { return flops_; }
  const ops::Workload &workload() const { return workload_; }

 private:
  // The steps of a round.
  struct Measured {
    std::vector<measure::BuildResult> built;             // one per candidate
    std::vector<std::optional<measure::RunResult>> ran;  // one per candidate; empty where the build failed
    /// The anchor's time this round over its time on the task's scale; 0: not anchored.
    double anchor_ratio = 0;
  };
  /// A program re-timed in every round (TuneOptions::anchor_rounds).
  struct Anchor {
    ir::PrimFunc program;
    std::string artifact;  ///< empty until built (a best resumed from the database)
    double latency = 0;    ///< on the task's scale; 0 until first re-timed
  };
  std::vector<search::Candidate> propose(int n);
  Measured build_and_run(const std::vector<search::Candidate> &batch);
  /// Stores the round's records and updates progress; the latencies (0 for an error).
  /// Stores the batch's records and books new bests; returns each candidate's label
  /// (LatencyLabel::kFastestRepeat; 0 for a failure).
  std::vector<double> record(const std::vector<search::Candidate> &batch, const Measured &measured);
  void train(const std::vector<search::Candidate> &batch, const std::vector<double> &labels);

  void resume_from_database();
  void refuse_buffers_over_the_memory_limit() const;
  void warm_start_from_other_tasks();
  int confirm_best(double started, std::vector<std::string> &disagreements);
  std::string artifact_name(const std::string &what) const;
  /// Checked against the reference, timed with the task's options.
  measure::RunInput run_input(const std::string &artifact) const;

  ops::Workload workload_;
  std::vector<std::string> passed_over_records_;
  Target target_;
  /// Set for cuda targets: their programs' feature rows carry the GPU columns.
  std::optional<costmodel::GpuLimits> gpu_limits_;
  const costmodel::GpuLimits *gpu_limits() const { return gpu_limits_ ? &*gpu_limits_ : nullptr; }
  TuneOptions options_;
  db::Database *db_;
  measure::Builder &builder_;
  measure::Runner &runner_;
  costmodel::CostModel &model_;
  ir::PrimFunc func_;
  db::Workload workload_record_;
  double flops_ = 0;
  std::unique_ptr<search::EvolutionarySearch> search_;
  std::string reference_artifact_;
  Progress progress_;
  /// Candidates whose measurement failed for the infrastructure's sake, to go first into
  /// the next batch, and how often each program (by trace) has failed so.
  std::vector<search::Candidate> retry_;
  std::map<std::string, int> infrastructure_failures_;
  static constexpr int kInfrastructureRetries = 3;
  std::string best_trace_;
  ir::Trace best_sketch_;
  /// Without a database: this run's successful measurements (latency, trace), the
  /// confirmation's candidates (with one, the database's top records are).
  std::vector<std::pair<double, std::string>> measured_;
  std::vector<double> best_gflops_curve_;
  /// The anchor, and the best program that succeeds it once re-timed beside it: a
  /// new best's own measurement won it the place among the batch, so it leans low and
  /// would pull the scale down with every handover; its re-timing does not.
  std::optional<Anchor> anchor_, next_anchor_;
  double start_ = 0;  ///< when prepare() ran, in the clock of now()
};

/// Sketch length stored in a record's metadata, so the sketch (what mutators change)
/// can be recovered from the full trace.
ir::Trace sketch_of(const ir::Trace &full, size_t sketch_instructions);

}  // namespace kiln::scheduler
