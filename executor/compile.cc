#include "executor/compile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "database/database.h"
#include "executor/memory_plan.h"
#include "executor/model.h"
#include "ir/schedule/schedule.h"
#include "ir/schedule/trace.h"
#include "support/json_read.h"
#include "support/sha256.h"
#include "te/te.h"

namespace kiln::executor {
namespace {

// What a loaded model may hold (Model::load refuses more): 1 TiB.
constexpr int64_t kMaxModelBytes = int64_t{1} << 40;

// A value's size in bytes, refused with the value's name when it exceeds what a model
// may hold (the product of a few large extents overflows 64 bits).
int64_t value_bytes(const frontend::Value &v) {
  int64_t bytes = ir::dtype_bytes(v.type.dtype);
  for (int64_t d : v.type.shape) {
    if (d < 0 || (d > 0 && bytes > kMaxModelBytes / d))
      throw ModelError("value '" + v.name + "' of shape " + frontend::shape_string(v.type.shape) + " needs more than " +
                       std::to_string(kMaxModelBytes >> 30) + " GiB: give the model's inputs smaller shapes (--shape)");
    bytes *= d;
  }
  return bytes;
}

// Writes `text` to `path`, checking every step: a full disk shows only at the close.
void write_text(const std::filesystem::path &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw ModelError("cannot write '" + path.string() + "': " + std::strerror(errno));
}

std::string file_sha256(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) throw ModelError("cannot read '" + path.string() + "' back");
  return support::sha256_hex(bytes.str());
}

// The files a compiled model's manifest says it wrote, when `dir` is a compiled model
// (its model.json says "kiln_model"); nullopt otherwise.
std::optional<std::set<std::string>> compiled_model_files(const std::filesystem::path &dir) {
  std::ifstream in(dir / "model.json");
  if (!in) return std::nullopt;
  nlohmann::json m = kiln::support::parse_json_or_discarded(in);
  if (m.is_discarded() || !m.is_object() || !m.contains("kiln_model")) return std::nullopt;
  std::set<std::string> files = {"model.json", "weights.bin"};
  if (m.contains("steps") && m["steps"].is_array())
    for (const nlohmann::json &s : m["steps"])
      if (s.is_object() && s.contains("artifact") && s["artifact"].is_string()) files.insert(s["artifact"]);
  return files;
}

// Refuses an output folder that is not ours to replace: anything but an empty folder, a
// compiled model holding only the files its manifest names, or a compiled model with
// dynamic dimensions holding only its manifest and its buckets' compiled models.
void check_replaceable(const std::filesystem::path &root, const std::string &out_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return;
  if (!std::filesystem::is_directory(root, ec))
    throw ModelError("'" + out_dir + "' exists and is not a folder; choose another output folder");
  if (std::filesystem::is_empty(root, ec)) return;
  if (std::filesystem::exists(root / "dynamic.json", ec)) {
    std::set<std::string> buckets;
    try {
      std::ifstream in(root / "dynamic.json");
      DynamicManifest m = DynamicManifest::from_json(kiln::support::parse_json(in));
      for (size_t i = 0; i < m.buckets.size(); ++i) buckets.insert(m.bucket_folder(i));
    } catch (const std::exception &) {
      throw ModelError("'" + out_dir +
                       "' holds a dynamic.json that is not a compiled model's; choose another output "
                       "folder");
    }
    for (const auto &entry : std::filesystem::directory_iterator(root, ec)) {
      std::string name = entry.path().filename().string();
      if (name == "dynamic.json" && entry.is_regular_file()) continue;
      if (!buckets.count(name) || !entry.is_directory())
        throw ModelError("'" + out_dir + "' is a compiled model but also holds '" + name +
                         "', which kiln compile did not write: move it away or choose another output folder");
      check_replaceable(entry.path(), out_dir + "/" + name);
    }
    return;
  }
  std::optional<std::set<std::string>> ours = compiled_model_files(root);
  if (!ours) throw ModelError("'" + out_dir + "' exists and is not a compiled model; choose another output folder");
  for (const auto &entry : std::filesystem::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (!ours->count(name) || !entry.is_regular_file())
      throw ModelError("'" + out_dir + "' is a compiled model but also holds '" + name +
                       "', which kiln compile did not write: move it away or choose another output folder");
  }
  if (ec) throw ModelError("cannot list '" + out_dir + "': " + ec.message());
}

// An output folder written beside its place under another name and renamed into place
// when complete: a failed or interrupted compile leaves the previous model (or nothing)
// there.
class StagedFolder {
 public:
  explicit StagedFolder(const std::string &out_dir) : out_dir_(out_dir), root_(out_dir) {
    while (!root_.empty() && !root_.has_filename()) root_ = root_.parent_path();  // "m.kiln/" names m.kiln
    if (root_.empty()) throw ModelError("the output folder '" + out_dir + "' names no folder");
    check_replaceable(root_, out_dir);
    suffix_ = "." + std::to_string(getpid());
    staging_ = root_;
    staging_ += ".partial" + suffix_;
    std::error_code ec;
    std::filesystem::remove_all(staging_, ec);
    std::filesystem::create_directories(staging_, ec);
    if (ec) throw ModelError("cannot create '" + staging_.string() + "': " + ec.message());
  }
  StagedFolder(const StagedFolder &) = delete;
  StagedFolder &operator=(const StagedFolder &) = delete;
  ~StagedFolder() {
    std::error_code ignored;
    if (!staging_.empty()) std::filesystem::remove_all(staging_, ignored);
  }

  const std::filesystem::path &path() const { return staging_; }

  // Into place: the previous model (checked to hold only its own files) aside, the new
  // one in, the previous one removed.
  void commit() {
    std::error_code ec;
    std::filesystem::path previous = root_;
    previous += ".previous" + suffix_;
    bool had_previous = std::filesystem::exists(root_, ec);
    if (had_previous) {
      std::filesystem::rename(root_, previous, ec);
      if (ec) throw ModelError("cannot move the previous '" + out_dir_ + "' aside: " + ec.message());
    }
    std::filesystem::rename(staging_, root_, ec);
    if (ec) {
      std::error_code ignored;
      if (had_previous) std::filesystem::rename(previous, root_, ignored);
      throw ModelError("cannot move the compiled model to '" + out_dir_ + "': " + ec.message());
    }
    staging_.clear();
    if (had_previous) std::filesystem::remove_all(previous, ec);
  }

 private:
  std::string out_dir_;
  std::filesystem::path root_, staging_;
  std::string suffix_;
};

// A subgraph that only reshapes a computed tensor (row-major: the same bytes in the
// same order) runs as no step: its output is a view of its input, at the same arena
// offset. A transformer exports a Reshape around every attention product; as copies
// they took 3% of a BERT encoder's time.
bool is_view(const frontend::Graph &graph, const frontend::Subgraph &s) {
  const std::vector<ops::OpCall> &ops = s.workload.ops;
  return ops.size() == 1 && ops[0].op == "reshape" && s.inputs.size() == 1 &&
         !graph.values[static_cast<size_t>(s.inputs[0])].is_constant();
}

// For every value, the value whose bytes it is: itself, or for a view the value it views
// (followed through views of views).
std::vector<frontend::ValueId> storage_of(const frontend::Graph &graph,
                                          const std::vector<frontend::Subgraph> &subgraphs) {
  std::vector<frontend::ValueId> root(graph.values.size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<frontend::ValueId>(v);
  for (const frontend::Subgraph &s : subgraphs)  // producers first: a view's input is resolved
    if (is_view(graph, s)) root[static_cast<size_t>(s.output)] = root[static_cast<size_t>(s.inputs[0])];
  return root;
}

// Offsets in the activation arena for every non-constant value a step or the caller
// touches (nullopt for the rest); the arena's size goes into the manifest. `steps` are
// the subgraphs that run, in order; a view shares its storage's bytes, which must then
// live as long as both.
std::vector<std::optional<int64_t>> plan_activations(const frontend::Graph &graph,
                                                     const std::vector<frontend::Subgraph> &subgraphs,
                                                     const std::vector<size_t> &steps,
                                                     const std::vector<frontend::ValueId> &storage,
                                                     nlohmann::json &manifest) {
  const int num_steps = static_cast<int>(steps.size());
  std::vector<std::optional<BufferLifetime>> lifetime(graph.values.size());
  auto touch = [&](frontend::ValueId value, int step) {
    const auto v = static_cast<size_t>(storage[static_cast<size_t>(value)]);
    if (graph.values[v].is_constant()) return;
    std::optional<BufferLifetime> &l = lifetime[v];
    if (!l) l = BufferLifetime{ir::dtype_bytes(graph.values[v].type.dtype), step, step};
    l->first = std::min(l->first, step);
    l->last = std::max(l->last, step);
  };
  for (frontend::ValueId v : graph.inputs) touch(v, -1);
  for (int step = 0; step < num_steps; ++step) {
    const frontend::Subgraph &s = subgraphs[steps[static_cast<size_t>(step)]];
    for (frontend::ValueId v : s.inputs) touch(v, step);
    touch(s.output, step);
  }
  for (frontend::ValueId v : graph.outputs) touch(v, num_steps);
  std::vector<BufferLifetime> planned;
  std::vector<size_t> value_of;
  for (size_t v = 0; v < lifetime.size(); ++v) {
    if (!lifetime[v]) continue;
    lifetime[v]->bytes = value_bytes(graph.values[v]);
    planned.push_back(*lifetime[v]);
    value_of.push_back(v);
  }
  MemoryPlan plan = plan_memory(planned);
  if (plan.arena_bytes > kMaxModelBytes || plan.unplanned_bytes > kMaxModelBytes)
    throw ModelError("the model's activations need more than " + std::to_string(kMaxModelBytes >> 30) +
                     " GiB at once: give its inputs smaller shapes (--shape)");
  std::vector<std::optional<int64_t>> offsets(graph.values.size());
  for (size_t i = 0; i < planned.size(); ++i) offsets[value_of[i]] = plan.offsets[i];
  for (size_t v = 0; v < offsets.size(); ++v) offsets[v] = offsets[static_cast<size_t>(storage[v])];
  manifest["arena_bytes"] = plan.arena_bytes;
  manifest["unplanned_bytes"] = plan.unplanned_bytes;
  return offsets;
}

// A tuned step's other programs, for choosing inside the model.
struct StepPrograms {
  ir::PrimFunc func;                     // the subgraph, unscheduled
  std::vector<db::Record> alternatives;  // the database's next best, fastest first
};

double record_seconds(const db::Record &r) { return r.confirmed_latency ? *r.confirmed_latency : r.mean_latency(); }

// Up to `n` records of `best`'s workload and target after it, within 30% of its latency:
// further down, a kernel rarely wins back in the model what it loses alone.
std::vector<db::Record> alternatives_of(db::Database &db, const frontend::Subgraph &s, const Target &target,
                                        const db::Record &best, int n) {
  std::vector<db::Record> out;
  for (db::Record &r : db.top_k(s.workload.key_hash(), target.str(), static_cast<size_t>(n) + 1)) {
    if (r.id == best.id || r.trace_json == best.trace_json) continue;
    if (record_seconds(r) > 1.3 * record_seconds(best) || out.size() == static_cast<size_t>(n)) break;
    out.push_back(std::move(r));
  }
  return out;
}

// The time of steps [first, last] inside the inferences: the median of `runs` each.
// The arena may place an input where a later step writes once the input is dead, so
// every run starts from the inputs again.
double window_ms(Model &model, const std::vector<ir::HostTensor> &inputs, size_t first, size_t last, int runs) {
  std::vector<double> ms = model.profile_steps(inputs, runs);
  double sum = 0;
  for (size_t i = first; i <= last; ++i) sum += ms[i];
  return sum;
}

// Steps [step, last] with `current` and with `candidate` as step's artifact, in rounds
// that alternate which goes first; returns current's median and the median of the
// per-round ratios candidate / current (what decides: both sides of a ratio are timed
// in the same seconds). The step is left with `current`.
struct WindowTiming {
  double current_ms, ratio;
};
WindowTiming time_in_model(Model &model, const std::vector<ir::HostTensor> &inputs, size_t step, size_t last,
                           const std::string &current, const std::string &candidate) {
  constexpr int kRounds = 4, kRuns = 10;
  std::vector<double> cur, ratio;
  for (int r = 0; r < kRounds; ++r) {
    double pair[2];
    for (int k = 0; k < 2; ++k) {
      bool take_candidate = (k == 0) == (r % 2 == 1);
      model.replace_step(step, take_candidate ? candidate : current);
      pair[take_candidate ? 1 : 0] = window_ms(model, inputs, step, last, kRuns);
    }
    cur.push_back(pair[0]);
    ratio.push_back(pair[1] / pair[0]);
  }
  model.replace_step(step, current);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return (v[v.size() / 2] + v[(v.size() - 1) / 2]) / 2;
  };
  return {median(cur), median(ratio)};
}

// Times each tuned step's alternatives inside the model written to `root` and keeps the
// faster programs: their artifacts replace the step's, and the manifest says so.
void choose_in_model(const std::filesystem::path &root, nlohmann::json &manifest,
                     const std::vector<StepPrograms> &programs, const BuildArtifact &build, const Target &target,
                     const std::function<void(const InModelChoice &)> &chosen, CompileReport &report) {
  Model model = Model::load(root.string());
  const std::vector<ir::HostTensor> inputs = model.random_inputs();
  const size_t num_steps = programs.size();
  for (size_t i = 0; i < num_steps; ++i) {
    const StepPrograms &p = programs[i];
    if (p.alternatives.empty()) continue;
    nlohmann::json &step = manifest["steps"][i];
    const std::string artifact = (root / step["artifact"].get<std::string>()).string();
    std::string current = artifact;
    InModelChoice choice;
    choice.step = i;
    choice.workload = step.value("workload", "");
    const size_t last = std::min(i + 2, num_steps - 1);
    for (size_t k = 0; k < p.alternatives.size(); ++k) {
      const db::Record &r = p.alternatives[k];
      std::string candidate = artifact + ".try" + std::to_string(k + 1);
      try {
        ir::PrimFunc scheduled = ir::Schedule::replay_stored(p.func, r.trace_json).func();
        build(scheduled, target, candidate);
      } catch (const std::exception &) {
        continue;  // a record that no longer replays or builds is no candidate
      }
      ++choice.tried;
      WindowTiming t = time_in_model(model, inputs, i, last, current, candidate);
      if (choice.window_ms == 0) choice.window_ms = choice.chosen_window_ms = t.current_ms;
      if (t.ratio < 0.98) {
        if (current != artifact) std::filesystem::remove(current);
        current = candidate;
        choice.chosen_rank = k + 1;
        choice.chosen_window_ms *= t.ratio;
        step["tuned_ms"] = record_seconds(r) * 1e3;
        step["chosen_in_model"] = {{"rank", k + 1}, {"record_id", r.id}};
        step["record_id"] = r.id;
      } else {
        std::filesystem::remove(candidate);
      }
    }
    if (current != artifact) {
      model.replace_step(i, current);
      std::filesystem::rename(current, artifact);  // the loaded copy stays mapped
      step["sha256"] = file_sha256(artifact);
    }
    report.in_model.push_back(choice);
    if (chosen) chosen(choice);
  }
}

}  // namespace

// The records a subgraph may compile with, best first (exact target, then the
// same-device fallback): the best and a few after it, for when one does not replay.
constexpr size_t kRecordsTried = 8;

CompileReport compile_model(const frontend::PreparedModel &model, const CompileOptions &options,
                            const std::string &out_dir, const std::function<void(size_t, size_t)> &progress,
                            const std::function<void(const InModelChoice &)> &chosen) {
  const frontend::Graph &graph = model.graph;
  const std::vector<frontend::Subgraph> &subgraphs = model.subgraphs;
  auto start = std::chrono::steady_clock::now();
  Target target;
  try {
    target = Target::parse(options.target);
  } catch (const std::invalid_argument &e) {
    throw ModelError(std::string("bad target: ") + e.what());
  }
  std::optional<db::Database> db;
  if (!options.db_path.empty()) db.emplace(db::Database::open(options.db_path, db::OpenMode::kReadOnly));

  StagedFolder folder(out_dir);
  const std::filesystem::path &staging = folder.path();

  nlohmann::json manifest{
      {"kiln_model", kModelFormatVersion}, {"target", target.str()}, {"pipeline", model.options.to_json()}};
  if (target.backend().is_gpu()) {
    // The steps are GPU kernels: model.cc hands them to GpuSteps.
    manifest["device"] = "cuda";
    manifest["arch"] = target.arch;
  }
  const std::vector<frontend::ValueId> storage = storage_of(graph, subgraphs);
  std::vector<size_t> steps;  // the subgraphs that run: all but views
  for (size_t i = 0; i < subgraphs.size(); ++i)
    if (!is_view(graph, subgraphs[i])) steps.push_back(i);
  std::vector<std::optional<int64_t>> arena_offsets = plan_activations(graph, subgraphs, steps, storage, manifest);
  // Constants no step reads (a weight a graph pass replaced, e.g. by batch-norm folding)
  // stay out of the folder.
  std::vector<bool> read(graph.values.size(), false);
  for (const frontend::Subgraph &s : subgraphs)
    for (frontend::ValueId v : s.inputs) read[static_cast<size_t>(v)] = true;
  for (frontend::ValueId v : graph.outputs) read[static_cast<size_t>(v)] = true;
  std::ofstream weights(staging / "weights.bin", std::ios::binary);
  int64_t offset = 0;
  manifest["values"] = nlohmann::json::array();
  for (size_t i = 0; i < graph.values.size(); ++i) {
    const frontend::Value &v = graph.values[i];
    nlohmann::json j{{"name", v.name}, {"shape", v.type.shape}, {"dtype", ir::dtype_name(v.type.dtype)}};
    if (v.is_constant() && read[i]) {
      int64_t bytes = value_bytes(v);
      weights.write(static_cast<const char *>(v.constant->data()), bytes);
      j["offset"] = offset;
      offset += bytes;
    } else if (arena_offsets[i]) {
      j["arena_offset"] = *arena_offsets[i];
    }
    manifest["values"].push_back(j);
  }
  weights.close();
  if (!weights) throw ModelError("cannot write '" + (staging / "weights.bin").string() + "': " + std::strerror(errno));
  manifest["inputs"] = graph.inputs;
  manifest["outputs"] = graph.outputs;
  // Graph inputs that are row indices (token ids): kernels clamp an index outside the
  // table, so Model::run checks these inputs first and names a bad one instead.
  manifest["index_inputs"] = nlohmann::json::array();
  for (size_t k = 0; k < graph.inputs.size(); ++k) {
    std::optional<int64_t> rows;
    for (const frontend::Node &n : graph.nodes) {
      if (n.op != "take" || n.inputs.size() != 2 || n.inputs[1] != graph.inputs[k]) continue;
      const std::vector<int64_t> &table = graph.values[static_cast<size_t>(n.inputs[0])].type.shape;
      int64_t axis = n.attrs.value("axis", int64_t{0});
      if (axis < 0) axis += static_cast<int64_t>(table.size());
      int64_t extent = table.at(static_cast<size_t>(axis));
      rows = rows ? std::min(*rows, extent) : extent;
    }
    if (rows) manifest["index_inputs"].push_back({{"input", k}, {"rows", *rows}});
  }
  manifest["steps"] = nlohmann::json::array();

  CompileReport report;
  report.subgraphs = subgraphs.size();
  report.views = subgraphs.size() - steps.size();
  report.arena_bytes = manifest["arena_bytes"].get<int64_t>();
  report.unplanned_bytes = manifest["unplanned_bytes"].get<int64_t>();
  std::optional<codegen::Compiler> compiler;
  BuildArtifact build = options.build_artifact;
  if (!build) {
    compiler.emplace();
    build = [&compiler](const ir::PrimFunc &func, const Target &t, const std::string &path) {
      compiler->build_artifact(func, t, path, /*needs_runtime_library=*/true);
    };
  }
  std::vector<StepPrograms> programs(steps.size());
  for (size_t step_index = 0; step_index < steps.size(); ++step_index) {
    const size_t i = steps[step_index];
    const frontend::Subgraph &s = subgraphs[i];
    ir::PrimFunc func = te::lower(s.workload.build_dag(), "subgraph" + std::to_string(i));
    std::string artifact = "sg" + std::to_string(i) + target.backend().artifact_extension();
    const std::filesystem::path artifact_path = staging / artifact;
    std::optional<db::Record> used;
    if (db) {
      // A record that does not replay on this subgraph (a damaged or foreign trace) or
      // does not build is passed over for the next one, with a warning.
      for (db::Record &r : db->top_k(s.workload.key_hash(), target.str(), kRecordsTried)) {
        try {
          ir::PrimFunc scheduled = ir::Schedule::replay_stored(func, r.trace_json).func();
          build(scheduled, target, artifact_path.string());
          used = std::move(r);
          break;
        } catch (const std::exception &e) {
          ++report.unusable_records;
          report.warnings.push_back("subgraph " + std::to_string(i) + " (" + s.workload.summary() + "): record " +
                                    std::to_string(r.id) +
                                    " of the database is unusable and was passed over: " + e.what());
        }
      }
    }
    if (used && options.choose_in_model > 0 && target.backend().chooses_programs_in_model()) {
      programs[step_index].func = func;
      programs[step_index].alternatives = alternatives_of(*db, s, target, *used, options.choose_in_model);
    }
    if (!used && db) {
      std::set<std::string> others;
      std::vector<std::string> unreadable;  // damaged records: warned about by the lookup above
      for (const db::Record &r : db->records_of(s.workload.key_hash(), &unreadable))
        if (r.ok() && r.target != target.str()) others.insert(r.target);
      for (const std::string &other : others) ++report.untuned_with_records_for[other];
    }
    if (!used) {
      try {
        ir::PrimFunc scheduled = options.untuned_schedule ? options.untuned_schedule(func, target) : func;
        build(scheduled, target, artifact_path.string());
      } catch (const std::exception &e) {
        throw ModelError("subgraph " + std::to_string(i) + " (" + s.workload.summary() + "): " + e.what());
      }
    }
    nlohmann::json args = s.inputs;
    args.push_back(s.output);
    nlohmann::json step = {{"artifact", artifact},
                           {"sha256", file_sha256(artifact_path)},
                           {"args", args},
                           {"workload", s.workload.summary()},
                           {"key_hash", s.workload.key_hash()},
                           {"tuned", used.has_value()}};
    if (used) {
      step["tuned_ms"] = record_seconds(*used) * 1e3;
      step["record_id"] = used->id;
    }
    manifest["steps"].push_back(std::move(step));
    (used ? report.tuned : report.untuned)++;
    if (progress) progress(step_index + 1, steps.size());
  }
  if (db && report.untuned > 0) {
    const nlohmann::json ours = model.options.to_json();
    for (const std::string &text : db->distinct_pipelines(target.str())) {
      nlohmann::json theirs = kiln::support::parse_json_or_discarded(text);
      try {
        frontend::PipelineOptions other = frontend::PipelineOptions::from_json(theirs);
        if (!(other == model.options)) report.tuned_with_other_options.push_back(other.flags());
      } catch (const std::invalid_argument &) {
        // Options a later Kiln recorded: nothing this one can suggest.
      }
    }
  }
  write_text(staging / "model.json", manifest.dump(1) + "\n");
  if (options.choose_in_model > 0 && !target.backend().chooses_programs_in_model())
    report.warnings.push_back(std::string("programs are not chosen inside the model on a ") + target.backend().name() +
                              ": the database's best is used");
  if (options.choose_in_model > 0 && target.backend().chooses_programs_in_model()) {
    try {
      choose_in_model(staging, manifest, programs, build, target, chosen, report);
    } catch (const codegen::CodegenError &e) {
      throw ModelError(std::string("choosing programs inside the model: ") + e.what());
    }
    write_text(staging / "model.json", manifest.dump(1) + "\n");
  }
  folder.commit();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

CompileReport compile_dynamic_model(const DynamicManifest &manifest,
                                    const std::function<frontend::PreparedModel(size_t bucket)> &prepare,
                                    const CompileOptions &options, const std::string &out_dir,
                                    const std::function<void(size_t bucket, const CompileReport &)> &bucket_done) {
  const auto start = std::chrono::steady_clock::now();
  if (manifest.buckets.empty()) throw ModelError("a model with dynamic dimensions needs at least one bucket");
  StagedFolder folder(out_dir);
  CompileReport total;
  std::set<std::string> other_options;
  for (size_t i = 0; i < manifest.buckets.size(); ++i) {
    const std::string name = manifest.bucket_folder(i);
    CompileReport r = compile_model(prepare(i), options, (folder.path() / name).string());
    total.subgraphs += r.subgraphs;
    total.tuned += r.tuned;
    total.untuned += r.untuned;
    total.views += r.views;
    total.unusable_records += r.unusable_records;
    for (const std::string &w : r.warnings) total.warnings.push_back(name + ": " + w);
    other_options.insert(r.tuned_with_other_options.begin(), r.tuned_with_other_options.end());
    for (const auto &[target, count] : r.untuned_with_records_for) total.untuned_with_records_for[target] += count;
    total.arena_bytes = std::max(total.arena_bytes, r.arena_bytes);
    total.unplanned_bytes = std::max(total.unplanned_bytes, r.unplanned_bytes);
    total.in_model.insert(total.in_model.end(), r.in_model.begin(), r.in_model.end());
    if (bucket_done) bucket_done(i, r);
  }
  total.tuned_with_other_options.assign(other_options.begin(), other_options.end());
  write_text(folder.path() / "dynamic.json", manifest.to_json().dump(1) + "\n");
  folder.commit();
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return total;
}

}  // namespace kiln::executor
