// How well do two timings of the same programs agree, timed alone (each candidate in
// its own process, one after the other) or interleaved (a batch's repeats round-robin
// in one process)? The agreement of two runs bounds the pairwise accuracy a cost model
// can reach against either run's labels.
//
// For each workload: sample --programs distinct candidates of the default search space
// for this host, build them once, then time the whole set --runs times per protocol,
// the protocols alternating run by run. Prints, per protocol, the share of program
// pairs that two runs order the same way (mean over pairs of runs), the median
// |ln(latency in run a / latency in run b)|, and the seconds per run.
//
// Usage: kiln_bench_timing_protocols [--programs N] [--runs R] [--repeat R] [--min-repeat-ms MS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "ir/structural.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "ops/workload.h"
#include "search/space.h"
#include "support/clock.h"
#include "te/te.h"

using namespace kiln;

namespace {

ir::TensorType f32(std::vector<int64_t> s) { return ir::TensorType{std::move(s), ir::DType::kFloat32}; }

struct Case {
  std::string name;
  ops::Workload workload;
};

Case dense(int64_t m, int64_t n, int64_t k) {
  ops::Workload w;
  w.inputs = {f32({m, k}), f32({n, k}), f32({n})};
  w.ops.push_back(ops::OpCall{"dense", nlohmann::json::object(), {"in0", "in1", "in2"}});
  w.outputs = {"op0"};
  return {"dense " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k), w};
}

Case depthwise(int64_t c, int64_t hw) {
  ops::Workload w;
  w.inputs = {f32({1, c, hw, hw}), f32({c, 1, 3, 3}), f32({c})};
  w.ops.push_back(ops::OpCall{"conv2d", {{"pads", {1, 1, 1, 1}}, {"groups", c}}, {"in0", "in1", "in2"}});
  w.ops.push_back(ops::OpCall{"relu", nlohmann::json::object(), {"op0"}});
  w.outputs = {"op1"};
  return {"depthwise " + std::to_string(c) + "@" + std::to_string(hw), w};
}

// Share of pairs (i, j) that both runs order the same way; ties count as disagreement.
double pair_agreement(const std::vector<double> &a, const std::vector<double> &b) {
  int64_t same = 0, pairs = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      ++pairs;
      if ((a[i] - a[j]) * (b[i] - b[j]) > 0) ++same;
    }
  return pairs ? static_cast<double>(same) / static_cast<double>(pairs) : 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double mean(const std::vector<double> &v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

int flag(int argc, char **argv, const char *name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char **argv) {
  const int programs = flag(argc, argv, "--programs", 32);
  const int runs = std::max(2, flag(argc, argv, "--runs", 3));
  measure::TimingOptions timing;
  timing.repeat = flag(argc, argv, "--repeat", 3);
  timing.min_repeat_ms = flag(argc, argv, "--min-repeat-ms", 10);

  Target target = Target::parse("llvm -mcpu=native");
  std::filesystem::path work =
      std::filesystem::temp_directory_path() / ("kiln-timing-protocols-" + std::to_string(getpid()));
  measure::LocalRunnerOptions alone_options, interleaved_options;
  alone_options.interleave_batches = false;
  // Runners first: they fork their servers before the builder pool starts threads.
  measure::LocalRunner alone(alone_options), interleaved(interleaved_options);
  measure::LocalBuilderPool builder(2, work, 60);

  std::printf("target %s, %d programs per workload, %d runs per protocol, repeat %d, min_repeat_ms %.0f\n\n",
              target.str().c_str(), programs, runs, timing.repeat, timing.min_repeat_ms);
  std::printf("%-22s %-12s %8s %15s %18s %12s\n", "workload", "protocol", "programs", "pair agreement",
              "median |ln ratio|", "s per run");
  for (const Case &c : {dense(128, 768, 768), depthwise(144, 56)}) {
    ir::PrimFunc func = te::lower(c.workload.build_dag(), "main");
    std::vector<ir::Trace> sketches = search::generate_sketches(func, search::default_rules(target), 0);
    auto post = search::default_postprocessors(target);
    std::vector<measure::BuildInput> builds{{func, target, "reference"}};
    std::set<size_t> seen;
    for (uint64_t seed = 0; static_cast<int>(builds.size()) <= programs && seed < 50ULL * programs; ++seed) {
      std::optional<search::Candidate> cand = search::realize(func, sketches[seed % sketches.size()], post, seed);
      if (!cand || !seen.insert(ir::structural_hash(cand->func.body)).second) continue;
      builds.push_back({cand->func, target, "p" + std::to_string(builds.size())});
    }
    std::vector<measure::BuildResult> built = builder.build(builds);
    if (!built[0].ok()) {
      std::fprintf(stderr, "%s: the reference did not build: %s\n", c.name.c_str(), built[0].message.c_str());
      return 1;
    }
    std::vector<measure::RunInput> inputs;
    for (size_t i = 1; i < built.size(); ++i) {
      if (!built[i].ok()) continue;
      measure::RunInput in;
      in.artifact_path = built[i].artifact_path;
      in.reference_artifact_path = built[0].artifact_path;
      in.timing = timing;
      inputs.push_back(in);
    }
    // latencies[protocol][run][program]; a program failing any run is left out.
    std::vector<std::vector<std::vector<double>>> latencies(2);
    std::vector<double> seconds(2, 0);
    std::vector<bool> ok(inputs.size(), true);
    for (int r = 0; r < runs; ++r) {
      for (int p = 0; p < 2; ++p) {
        double t0 = support::now_seconds();
        std::vector<measure::RunResult> results = (p == 0 ? alone : interleaved).run(inputs);
        seconds[p] += support::now_seconds() - t0;
        std::vector<double> run(inputs.size(), 0);
        for (size_t i = 0; i < results.size(); ++i) {
          if (!results[i].ok())
            ok[i] = false;
          else
            run[i] = mean(results[i].repeat_seconds);
        }
        latencies[p].push_back(run);
      }
    }
    for (int p = 0; p < 2; ++p) {
      std::vector<double> agreements, log_ratios;
      for (int a = 0; a < runs; ++a)
        for (int b = a + 1; b < runs; ++b) {
          std::vector<double> x, y;
          for (size_t i = 0; i < inputs.size(); ++i)
            if (ok[i]) {
              x.push_back(latencies[p][a][i]);
              y.push_back(latencies[p][b][i]);
              log_ratios.push_back(std::fabs(std::log(x.back() / y.back())));
            }
          agreements.push_back(pair_agreement(x, y));
        }
      std::printf("%-22s %-12s %8zu %15.3f %18.3f %12.1f\n", c.name.c_str(), p == 0 ? "alone" : "interleaved",
                  static_cast<size_t>(std::count(ok.begin(), ok.end(), true)), mean(agreements), median(log_ratios),
                  seconds[p] / runs);
    }
  }
  std::filesystem::remove_all(work);
  return 0;
}
