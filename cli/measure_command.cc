#include "cli/measure_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include "support/file_read.h"
#include "support/flag_checks.h"

#include "cli/common_flags.h"
#include "cli/tune_op_command.h"
#include "cli/workload_args.h"
#include "ir/schedule/schedule.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "search/space.h"
#include "support/json_read.h"
#include "te/flops.h"

namespace kiln::cli {

namespace {
struct MeasureArgs {
  WorkloadArgs workload;
  std::string trace_file;
  std::string target = "llvm -mcpu=native";
  int repeat = 5;
  double min_repeat_ms = 20;
  int threads = 0;
  bool flush_cache = false;
  bool flush_args = false;
  double run_timeout = 10;
  double build_timeout = 60;
  int64_t memory_limit_mb = 4096;
};
}  // namespace

void add_measure_command(CLI::App &app) {
  auto *cmd = app.add_subcommand("measure", "Build a task with a trace, check it against the reference and time it");
  auto args = std::make_shared<MeasureArgs>();
  args->workload.add_to(*cmd);
  cmd->add_option("--trace", args->trace_file, "schedule trace JSON file (omit to measure the unscheduled program)");
  add_target_option(*cmd, args->target, "the target to build and measure for");
  cmd->add_option("--repeat", args->repeat,
                  "timed repeats, each the mean of enough calls to last --min-repeat-ms (more than tuning's: one "
                  "program measured once, where tuning times thousands)")
      ->capture_default_str()
      ->check(at_least(1, 100000));
  cmd->add_option("--min-repeat-ms", args->min_repeat_ms,
                  "grow calls per repeat until a repeat lasts this long (longer than tuning's, for the same reason)")
      ->capture_default_str()
      ->check(finite_range(0, 60000));
  add_threads_option(*cmd, args->threads, "threads for parallel loops");
  cmd->add_flag("--flush-cache", args->flush_cache, "flush the last-level cache before every repeat");
  cmd->add_flag("--flush-args", args->flush_args,
                "evict the kernel's buffers from the caches before every call and time each call alone");
  cmd->add_option("--run-timeout", args->run_timeout, "seconds a run may take before it is killed")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--build-timeout", args->build_timeout, "seconds a build may take")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--memory-limit-mb", args->memory_limit_mb,
                  "address space the run may add (its inputs, outputs and the reference's outputs)")
      ->capture_default_str()
      ->check(at_least(1, 1 << 24));
  cmd->callback([args] {
    // The CPU runner forks its server first, while this process has no other threads; a
    // cuda target is measured by kiln-cuda-measure processes on this host's GPU.
    measure::HostRunnerOptions options;
    options.cpu.run_timeout_seconds = args->run_timeout;
    options.cpu.num_threads = args->threads;
    options.cpu.memory_limit_bytes = args->memory_limit_mb << 20;
    options.cuda.run_timeout_seconds = args->run_timeout;
    std::unique_ptr<measure::Runner> runner = make_host_runner(args->target, options);
    const bool gpu = Target::parse(args->target).backend().is_gpu();

    ops::Workload w;
    te::ComputeDAG dag;
    Target target;
    try {
      w = args->workload.build();
      dag = w.build_dag();
      target = Target::parse(args->target);
    } catch (const std::exception &e) {
      fail(e.what());
    }
    ir::PrimFunc naive = te::lower(dag, w.ops.size() == 1 ? w.ops[0].op : "fused");
    // A GPU cannot run the unscheduled program: the reference is the untuned one.
    if (gpu) naive = search::untuned_schedule(naive, target);
    ir::PrimFunc scheduled = naive;
    if (!args->trace_file.empty()) {
      nlohmann::json trace_json;
      try {
        trace_json = kiln::support::read_json_file(args->trace_file, "trace file");
      } catch (const std::exception &e) {
        fail(e.what());
      }
      try {
        scheduled = ir::Schedule::replay(naive, ir::Trace::from_json(trace_json)).func();
      } catch (const std::exception &e) {
        fail("trace '" + args->trace_file + "' does not apply to this task: " + e.what());
      }
    }
    std::filesystem::path work = std::filesystem::temp_directory_path() / ("kiln_measure_" + std::to_string(getpid()));
    measure::remove_on_interrupt(work);
    measure::LocalBuilderPool pool(1, work, args->build_timeout);
    std::vector<measure::BuildResult> built = pool.build(
        {measure::BuildInput{scheduled, target, "candidate"}, measure::BuildInput{naive, target, "reference"}});
    auto cleanup = [&] { std::filesystem::remove_all(work); };
    if (!built[0].ok() || !built[1].ok()) {
      const measure::BuildResult &bad = built[0].ok() ? built[1] : built[0];
      cleanup();
      fail(std::string(measure::to_string(bad.error)) + ": " + bad.message);
    }
    measure::RunInput in;
    in.artifact_path = built[0].artifact_path;
    in.reference_artifact_path = built[1].artifact_path;
    in.timing.repeat = args->repeat;
    in.timing.min_repeat_ms = args->min_repeat_ms;
    in.timing.flush_cache = args->flush_cache;
    in.timing.flush_args = args->flush_args;
    measure::RunResult r = runner->run({in})[0];
    cleanup();
    std::cout << "task:    " << w.summary() << "  (key " << w.key_hash().substr(0, 16) << ")\n"
              << "target:  " << target.str() << "\n"
              << "build:   " << built[0].build_seconds << " s\n";
    if (!r.ok()) {
      std::cout << "check:   FAILED (" << measure::to_string(r.error) << ")\n";
      fail(r.message);
    }
    std::vector<double> t = r.repeat_seconds;
    std::sort(t.begin(), t.end());
    double flops = te::estimate_flops(dag);
    std::cout << "check:   ok (matches the unscheduled program)\n"
              << "latency: median " << t[t.size() / 2] * 1e3 << " ms, min " << t.front() * 1e3 << " ms over "
              << t.size() << " repeats of " << r.number << " calls\n"
              << "speed:   " << flops / t[t.size() / 2] / 1e9 << " GFLOP/s (median)\n";
  });
}

}  // namespace kiln::cli
