#include "executor/compile.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "database/database.h"
#include "executor/memory_plan.h"
#include "executor/model.h"
#include "ir/schedule/schedule.h"
#include "ir/schedule/trace.h"
#include "ir/te.h"
#include "search/space.h"

namespace kiln::executor {
namespace {

// The untuned default: auto-inline plus parallel/vectorize annotations, decisions from
// a fixed seed so that the same model compiles to the same code.
ir::PrimFunc default_schedule(const ir::PrimFunc &func, const Target &target) {
  std::vector<ir::Trace> sketches = search::generate_sketches(func, search::untuned_rules(target), 0);
  auto post = search::default_postprocessors(target);
  for (const ir::Trace &sketch : sketches)
    if (std::optional<search::Candidate> c = search::realize(func, sketch, post, 0)) return c->func;
  return func;
}

// Offsets in the activation arena for every non-constant value a step or the caller
// touches (nullopt for the rest); the arena's size goes into the manifest.
std::vector<std::optional<int64_t>> plan_activations(const frontend::Graph &graph,
                                                     const std::vector<frontend::Subgraph> &subgraphs,
                                                     nlohmann::json &manifest) {
  const int num_steps = static_cast<int>(subgraphs.size());
  std::vector<std::optional<BufferLifetime>> lifetime(graph.values.size());
  auto touch = [&](frontend::ValueId v, int step) {
    if (graph.values[static_cast<size_t>(v)].is_constant()) return;
    std::optional<BufferLifetime> &l = lifetime[static_cast<size_t>(v)];
    if (!l) l = BufferLifetime{ir::dtype_bytes(graph.values[static_cast<size_t>(v)].type.dtype), step, step};
    l->first = std::min(l->first, step);
    l->last = std::max(l->last, step);
  };
  for (frontend::ValueId v : graph.inputs) touch(v, -1);
  for (int step = 0; step < num_steps; ++step) {
    for (frontend::ValueId v : subgraphs[static_cast<size_t>(step)].inputs) touch(v, step);
    touch(subgraphs[static_cast<size_t>(step)].output, step);
  }
  for (frontend::ValueId v : graph.outputs) touch(v, num_steps);
  std::vector<BufferLifetime> planned;
  std::vector<size_t> value_of;
  for (size_t v = 0; v < lifetime.size(); ++v) {
    if (!lifetime[v]) continue;
    for (int64_t d : graph.values[v].type.shape) lifetime[v]->bytes *= d;
    planned.push_back(*lifetime[v]);
    value_of.push_back(v);
  }
  MemoryPlan plan = plan_memory(planned);
  std::vector<std::optional<int64_t>> offsets(graph.values.size());
  for (size_t i = 0; i < planned.size(); ++i) offsets[value_of[i]] = plan.offsets[i];
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
double window_ms(Model &model, size_t first, size_t last, int runs) {
  model.run();
  std::vector<double> ms = model.profile_steps(runs);
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
WindowTiming time_in_model(Model &model, size_t step, size_t last, const std::string &current,
                           const std::string &candidate) {
  constexpr int kRounds = 4, kRuns = 10;
  std::vector<double> cur, ratio;
  for (int r = 0; r < kRounds; ++r) {
    double pair[2];
    for (int k = 0; k < 2; ++k) {
      bool take_candidate = (k == 0) == (r % 2 == 1);
      model.replace_step(step, take_candidate ? candidate : current);
      pair[take_candidate ? 1 : 0] = window_ms(model, step, last, kRuns);
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
                     const std::vector<StepPrograms> &programs, codegen::Compiler &compiler, const Target &target,
                     const std::function<void(const InModelChoice &)> &chosen, CompileReport &report) {
  Model model = Model::load(root.string());
  model.run(model.random_inputs());  // the input buffers keep them
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
        ir::PrimFunc scheduled =
            ir::Schedule::replay(p.func, ir::Trace::from_json(nlohmann::json::parse(r.trace_json))).func();
        compiler.build_artifact(scheduled, target, candidate);
      } catch (const std::exception &) {
        continue;  // a record that no longer replays or builds is no candidate
      }
      ++choice.tried;
      WindowTiming t = time_in_model(model, i, last, current, candidate);
      if (choice.window_ms == 0) choice.window_ms = choice.chosen_window_ms = t.current_ms;
      if (t.ratio < 0.98) {
        if (current != artifact) std::filesystem::remove(current);
        current = candidate;
        choice.chosen_rank = k + 1;
        choice.chosen_window_ms *= t.ratio;
        step["tuned_ms"] = record_seconds(r) * 1e3;
        step["chosen_in_model"] = {{"rank", k + 1}, {"record_id", r.id}};
      } else {
        std::filesystem::remove(candidate);
      }
    }
    if (current != artifact) {
      model.replace_step(i, current);
      std::filesystem::rename(current, artifact);  // the loaded copy stays mapped
    }
    report.in_model.push_back(choice);
    if (chosen) chosen(choice);
  }
}

}  // namespace

CompileReport compile_model(const frontend::Graph &graph, const std::vector<frontend::Subgraph> &subgraphs,
                            const CompileOptions &options, const std::string &out_dir,
                            const std::function<void(size_t, size_t)> &progress,
                            const std::function<void(const InModelChoice &)> &chosen) {
  auto start = std::chrono::steady_clock::now();
  Target target;
  try {
    target = Target::parse(options.target);
  } catch (const std::invalid_argument &e) {
    throw ModelError(std::string("bad target: ") + e.what());
  }
  std::optional<db::Database> db;
  if (!options.db_path.empty()) db.emplace(db::Database::open(options.db_path, db::OpenMode::kReadOnly));

  std::filesystem::path root(out_dir);
  std::error_code ec;
  // Only a compiled model (or an empty folder) is replaced: never a folder of the user's.
  if (std::filesystem::exists(root, ec)) {
    bool empty = std::filesystem::is_directory(root, ec) && std::filesystem::is_empty(root, ec);
    if (!empty && !std::filesystem::exists(root / "model.json", ec))
      throw ModelError("'" + out_dir + "' exists and is not a compiled model; choose another output folder");
    std::filesystem::remove_all(root, ec);
  }
  std::filesystem::create_directories(root, ec);
  if (ec) throw ModelError("cannot create '" + out_dir + "': " + ec.message());

  nlohmann::json manifest{{"kiln_model", kModelFormatVersion}, {"target", target.str()}};
  std::vector<std::optional<int64_t>> arena_offsets = plan_activations(graph, subgraphs, manifest);
  // Constants no step reads (a weight a graph pass replaced, e.g. by batch-norm folding)
  // stay out of the folder.
  std::vector<bool> read(graph.values.size(), false);
  for (const frontend::Subgraph &s : subgraphs)
    for (frontend::ValueId v : s.inputs) read[static_cast<size_t>(v)] = true;
  for (frontend::ValueId v : graph.outputs) read[static_cast<size_t>(v)] = true;
  std::ofstream weights(root / "weights.bin", std::ios::binary);
  int64_t offset = 0;
  manifest["values"] = nlohmann::json::array();
  for (size_t i = 0; i < graph.values.size(); ++i) {
    const frontend::Value &v = graph.values[i];
    nlohmann::json j{{"name", v.name}, {"shape", v.type.shape}, {"dtype", ir::dtype_name(v.type.dtype)}};
    if (v.is_constant() && read[i]) {
      auto bytes = static_cast<int64_t>(v.constant->size() * ir::dtype_bytes(v.type.dtype));
      weights.write(static_cast<const char *>(v.constant->data()), bytes);
      j["offset"] = offset;
      offset += bytes;
    } else if (arena_offsets[i]) {
      j["arena_offset"] = *arena_offsets[i];
    }
    manifest["values"].push_back(j);
  }
  weights.close();
  if (!weights) throw ModelError("cannot write '" + (root / "weights.bin").string() + "'");
  manifest["inputs"] = graph.inputs;
  manifest["outputs"] = graph.outputs;
  manifest["steps"] = nlohmann::json::array();

  CompileReport report;
  report.subgraphs = subgraphs.size();
  report.arena_bytes = manifest["arena_bytes"].get<int64_t>();
  report.unplanned_bytes = manifest["unplanned_bytes"].get<int64_t>();
  codegen::Compiler compiler;
  std::vector<StepPrograms> programs(subgraphs.size());
  for (size_t i = 0; i < subgraphs.size(); ++i) {
    const frontend::Subgraph &s = subgraphs[i];
    ir::PrimFunc func = te::lower(s.workload.build_dag(), "subgraph" + std::to_string(i));
    ir::PrimFunc scheduled;
    bool tuned = false;
    std::optional<double> tuned_seconds;
    if (db) {
      if (std::optional<db::Record> best = db->best(s.workload.key_hash(), target.str())) {
        try {
          scheduled = ir::Schedule::replay(func, ir::Trace::from_json(nlohmann::json::parse(best->trace_json))).func();
          tuned = true;
          tuned_seconds = record_seconds(*best);
          if (options.choose_in_model > 0) {
            programs[i].func = func;
            programs[i].alternatives = alternatives_of(*db, s, target, *best, options.choose_in_model);
          }
        } catch (const std::exception &) {
          // A record that no longer replays (an older trace format) is no schedule.
        }
      }
    }
    if (!tuned) scheduled = default_schedule(func, target);
    std::string artifact = "sg" + std::to_string(i) + ".so";
    try {
      compiler.build_artifact(scheduled, target, (root / artifact).string());
    } catch (const codegen::CodegenError &e) {
      throw ModelError("subgraph " + std::to_string(i) + " (" + s.workload.summary() + "): " + e.what());
    }
    nlohmann::json args = s.inputs;
    args.push_back(s.output);
    nlohmann::json step = {{"artifact", artifact},
                           {"args", args},
                           {"workload", s.workload.summary()},
                           {"key_hash", s.workload.key_hash()},
                           {"tuned", tuned}};
    if (tuned_seconds) step["tuned_ms"] = *tuned_seconds * 1e3;
    manifest["steps"].push_back(std::move(step));
    (tuned ? report.tuned : report.untuned)++;
    if (progress) progress(i + 1, subgraphs.size());
  }
  std::ofstream(root / "model.json") << manifest.dump(1) << '\n';
  if (options.choose_in_model > 0) {
    try {
      choose_in_model(root, manifest, programs, compiler, target, chosen, report);
    } catch (const codegen::CodegenError &e) {
      throw ModelError(std::string("choosing programs inside the model: ") + e.what());
    }
    std::ofstream(root / "model.json") << manifest.dump(1) << '\n';
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace kiln::executor
