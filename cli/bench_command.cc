#include "cli/common_flags.h"
#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/compiled_model_files.h"
#include "support/flag_checks.h"

namespace kiln::cli {

namespace {

// Each step's median inside the inferences beside what its kernel was tuned to alone:
// a step much slower in the model than when tuned loses time to what the tuner's
// timing does not see (cold weights, the previous step's cache footprint).
void print_step_profile(const std::vector<executor::StepInfo> &steps, const std::vector<double> &step_ms, int runs) {
  double total = 0, tuned_total = 0, tuned_in_model = 0;
  for (double t : step_ms) total += t;
  std::printf("per step, median of %d runs, each step timed inside the inference:\n", runs);
  std::printf("%5s %12s %10s %12s %7s  %s\n", "step", "in model ms", "tuned ms", "model/tuned", "share", "workload");
  for (size_t i = 0; i < steps.size(); ++i) {
    const executor::StepInfo &s = steps[i];
    char tuned[32] = "-", ratio[32] = "-";
    if (s.tuned_ms) {
      std::snprintf(tuned, sizeof tuned, "%.3f", *s.tuned_ms);
      std::snprintf(ratio, sizeof ratio, "%.2f", step_ms[i] / *s.tuned_ms);
      tuned_total += *s.tuned_ms;
      tuned_in_model += step_ms[i];
    } else if (!s.tuned) {
      std::snprintf(tuned, sizeof tuned, "untuned");
    }
    std::printf("%5zu %12.3f %10s %12s %6.1f%%  %s\n", i, step_ms[i], tuned, ratio,
                total > 0 ? 100 * step_ms[i] / total : 0.0, s.workload.c_str());
  }
  std::printf("sum of steps %.3f ms", total);
  if (tuned_total > 0)
    std::printf("; the tuned steps take %.3f ms here and %.3f ms as tuned (%.2fx)", tuned_in_model, tuned_total,
                tuned_in_model / tuned_total);
  std::printf("\n");
}

// Medians and minimum of `repeat` timed calls after 3 warm-up ones.
template <typename Call>
std::vector<double> time_calls(int repeat, const Call &call) {
  std::vector<double> ms;
  try {
    for (int i = 0; i < 3; ++i) call();
    for (int i = 0; i < repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      call();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  } catch (const executor::ModelError &e) {
    fail(e.what());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

std::vector<int64_t> dim_values_from(const executor::DynamicManifest &m, const std::vector<std::string> &specs) {
  std::vector<int64_t> values;
  for (const executor::DynamicDim &d : m.dims) values.push_back(d.max);
  std::set<std::string> given;
  for (const std::string &spec : specs) {
    size_t eq = spec.find('=');
    std::string name = spec.substr(0, eq == std::string::npos ? 0 : eq);
    auto it = std::find_if(m.dims.begin(), m.dims.end(), [&](const executor::DynamicDim &d) { return d.name == name; });
    if (it == m.dims.end()) {
      std::string names;
      for (const executor::DynamicDim &d : m.dims) names += (names.empty() ? "" : ", ") + d.name;
      fail("--dim '" + spec + "' must be NAME=VALUE with NAME one of the model's dynamic dimensions: " + names);
    }
    if (!given.insert(name).second) fail("--dim " + name + " is given twice; give each dimension once");
    try {
      size_t used = 0;
      values[static_cast<size_t>(it - m.dims.begin())] = std::stoll(spec.substr(eq + 1), &used);
      if (used != spec.size() - eq - 1) throw std::invalid_argument("trailing characters");
    } catch (const std::exception &) {
      fail("--dim '" + spec + "': the value is not an integer");
    }
  }
  return values;
}

struct BenchArgs {
  std::string model;
  int threads = 0;
  int repeat = 50;
  bool profile = false;
  std::vector<std::string> dims;
};

void bench_dynamic(const BenchArgs &args) {
  if (args.profile)
    fail("--profile times the steps of one compiled model: give it a bucket's folder inside " + args.model);
  executor::DynamicModel model = load_dynamic_model(args.model);
  if (args.threads > 0) executor::Model::set_threads(args.threads);
  std::vector<int64_t> values = dim_values_from(model.manifest(), args.dims);
  std::vector<ir::HostTensor> inputs;
  std::vector<executor::DynamicPiece> pieces;
  try {
    pieces = model.pieces_of(values);
    inputs = model.random_inputs(values);
  } catch (const executor::ModelError &e) {
    fail(e.what());
  }
  std::vector<double> ms = time_calls(args.repeat, [&] { model.run(inputs); });
  std::string at;
  for (size_t d = 0; d < values.size(); ++d)
    at += (d ? ", " : "") + model.manifest().dims[d].name + "=" + std::to_string(values[d]);
  std::string buckets;
  size_t steps = 0;
  for (const executor::DynamicPiece &p : pieces) {
    buckets += (buckets.empty() ? "" : " + ") + model.manifest().bucket_folder(p.bucket);
    steps += model.bucket(p.bucket).num_steps();
  }
  std::printf("%s at %s (bucket%s %s, %zu steps): median %s, min %s over %d runs\n", args.model.c_str(), at.c_str(),
              pieces.size() > 1 ? "s" : "", buckets.c_str(), steps, format_ms(ms[ms.size() / 2]).c_str(),
              format_ms(ms.front()).c_str(), args.repeat);
}

}  // namespace

void add_bench_command(CLI::App &app) {
  auto args = std::make_shared<BenchArgs>();
  auto *cmd = app.add_subcommand("bench", "Time a compiled model on random inputs: median and min over repeats");
  add_compiled_model_option(*cmd, args->model);
  add_threads_option(*cmd, args->threads, "threads of the runtime pool");
  cmd->add_option("--repeat", args->repeat,
                  "timed inferences after 3 warm-up runs (many: a whole model is timed once per run, where "
                  "kiln measure and tuning time a kernel's many calls per repeat)")
      ->capture_default_str()
      ->check(at_least(1, 1000000));
  cmd->add_flag("--profile", args->profile,
                "then time every step inside the inferences (R more runs) and compare it with the latency its "
                "kernel was tuned to");
  cmd->add_option("--dim", args->dims,
                  "NAME=VALUE: for a model with dynamic dimensions, the value to time it at (each dimension not "
                  "given: its maximum); the timing includes padding the inputs to the bucket and taking the "
                  "outputs from it");
  cmd->callback([args] {
    check_compiled_model(args->model);
    if (executor::is_dynamic_model(args->model)) {
      bench_dynamic(*args);
      return;
    }
    if (!args->dims.empty()) fail("--dim is for models compiled with dynamic dimensions; " + args->model + " has none");
    executor::Model model = load_compiled_model(args->model);
    if (args->threads > 0) executor::Model::set_threads(args->threads);
    std::vector<ir::HostTensor> inputs = model.random_inputs();
    std::vector<double> ms = time_calls(args->repeat, [&] { model.run(inputs); });
    std::printf("%s: %zu steps, median %s, min %s over %d runs\n", args->model.c_str(), model.num_steps(),
                format_ms(ms[ms.size() / 2]).c_str(), format_ms(ms.front()).c_str(), args->repeat);
    if (args->profile) {
      std::vector<double> step_ms;
      try {
        step_ms = model.profile_steps(inputs, args->repeat);
      } catch (const executor::ModelError &e) {
        fail(e.what());
      }
      print_step_profile(model.steps(), step_ms, args->repeat);
    }
  });
}

}  // namespace kiln::cli
