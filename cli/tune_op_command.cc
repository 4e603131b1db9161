#include "cli/tune_op_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include "support/flag_checks.h"

#include "cli/common_flags.h"
#include "cli/workload_args.h"
#include "codegen/runtime/abi.h"
#include "costmodel/features.h"
#include "costmodel/xgb_model.h"
#include "measure/host_runner.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "rpc/remote_runner.h"
#include "scheduler/task_tuner.h"

namespace kiln::cli {

namespace {
struct TuneArgs : TuningArgs {
  WorkloadArgs workload;
};
}  // namespace

void add_tuning_flags(CLI::App *cmd, TuningArgs &args) {
  TuningArgs *a = &args;
  add_target_option(*cmd, a->target, "the target to tune for",
                    std::string(kThisHost) + "; with a tracker runner, the target its runners report");
  cmd->add_option("--runner", a->runner,
                  "where candidates run: local (this machine) or tracker://HOST:PORT/KEY (the runners of KEY "
                  "behind a kiln tracker)")
      ->capture_default_str();
  a->tracker_client.add_flags(*cmd, /*hidden_alias_prefix=*/"tracker-");
  cmd->add_option("--queue-deadline", a->queue_deadline,
                  "with a tracker: seconds a candidate may wait for a runner before tuning stops with an error")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--run-timeout", a->run_timeout,
                  "seconds one candidate run (load, check, timing) may take before it is killed (a remote "
                  "runner applies its own --run-timeout; this bounds the tracker's lease)")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--memory-limit-mb", a->memory_limit_mb,
                  "local runner: address space one candidate run may add (its inputs, outputs and the "
                  "reference's outputs); a workload whose buffers alone exceed it is refused before tuning")
      ->capture_default_str()
      ->check(support::at_least(1, 1 << 24));
  cmd->add_option("--timing", a->timing_mode,
                  "local runner: interleaved (each batch's timed repeats run round-robin in one process, so drift "
                  "of the host hits every candidate alike; checks stay one process per candidate) or alone (each "
                  "candidate timed in its own process, one after the other)")
      ->capture_default_str()
      ->check(CLI::IsMember({"interleaved", "alone"}));
  cmd->add_option("--db", a->db,
                  "SQLite tuning database (created if missing; a rerun resumes; kiln compile reads the same default)")
      ->capture_default_str();
  cmd->add_option("--trials", a->options.trials, "candidates to measure in this run")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--batch", a->options.batch, "candidates built and measured per round")
      ->capture_default_str()
      ->check(at_least(1, 4096));
  cmd->add_option("--time", a->options.time_limit_seconds, "stop after this many seconds (0: no limit)")
      ->capture_default_str()
      ->check(finite_range(0, 1e7));
  cmd->add_option("--seed", a->options.seed, "makes the search deterministic apart from timings")
      ->capture_default_str();
  cmd->add_option("--builders", a->builders, "parallel build workers")->capture_default_str()->check(at_least(1, 256));
  cmd->add_option("--cost-model", a->cost_model, "xgb (learned) or random (ablation)")
      ->capture_default_str()
      ->check(CLI::IsMember({"xgb", "random"}));
  cmd->add_option("--cost-model-loss", a->cost_model_loss,
                  "the learned model's loss: rank (logistic loss on the order of pairs of programs of one task) or "
                  "squared (squared error on normalized throughput, Ansor's)")
      ->capture_default_str()
      ->check(CLI::IsMember({"rank", "squared"}));
  cmd->add_option("--population", a->options.evolution.population, "evolutionary search population")
      ->capture_default_str()
      ->check(at_least(1, 1000000));
  cmd->add_option("--generations", a->options.evolution.generations, "mutation rounds per batch")
      ->capture_default_str()
      ->check(at_least(0, 1000));
  cmd->add_option("--eps", a->options.evolution.eps_greedy, "share of each batch picked at random")
      ->capture_default_str()
      ->check(finite_range(0, 1));
  cmd->add_option("--repeat", a->options.timing.repeat,
                  "timed repeats per candidate (few: a search times thousands; kiln measure's default is larger)")
      ->capture_default_str()
      ->check(at_least(1, 100000));
  cmd->add_option("--min-repeat-ms", a->options.timing.min_repeat_ms,
                  "minimum duration of one repeat (calls per repeat grow until it lasts this long)")
      ->capture_default_str()
      ->check(finite_range(0, 60000));
  cmd->add_flag("--flush-args", a->options.timing.flush_args,
                "evict every buffer of the kernel from the caches before each timed call and time each call alone "
                "(weights arrive from memory, as inside a model, instead of sitting in the caches)");
  cmd->add_option("--give-up-factor", a->options.give_up_factor,
                  "time a candidate whose warm-up call and a second, warm look (about an eighth of --min-repeat-ms) "
                  "are both this many times slower than the best by that look alone (0: always the full protocol)")
      ->capture_default_str()
      ->check(finite_range(0, 1e6));
  cmd->add_flag("--anchor", a->options.anchor_rounds,
                "re-time the best program in every round beside its candidates and scale the round's latencies "
                "by how much slower or faster it ran than on the task's scale (local runner with interleaved "
                "timing only; experimental)");
  cmd->add_option("--confirm-top", a->options.confirm_top,
                  "at the end, re-time this many of the fastest programs known, interleaved, and keep the one "
                  "with the lowest median (0: the best single measurement wins)")
      ->capture_default_str()
      ->check(at_least(0, 1000));
  cmd->add_option("--confirm-runs", a->options.confirm_runs, "extra timing runs per program for --confirm-top")
      ->capture_default_str()
      ->check(at_least(1, 1000));
  cmd->add_flag("--warm-start", a->options.warm_start,
                "rank the first rounds with a cost model trained on the database's records of other workloads "
                "for this target, until this task has enough programs of its own");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress line");
}

void warn_about_passed_over_records(const std::vector<std::string> &messages) {
  if (messages.empty()) return;
  std::cerr << "warning: " << messages.size() << " record" << (messages.size() == 1 ? "" : "s")
            << " of the database could not be read and " << (messages.size() == 1 ? "was" : "were")
            << " passed over (first: " << support::printable(messages.front())
            << "); `kiln db stats` counts damaged records, `kiln db prune` removes them\n";
}

std::unique_ptr<measure::Runner> make_host_runner(const std::string &target_text,
                                                  const measure::HostRunnerOptions &options) {
  Target target;
  try {
    target = Target::parse(target_text);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  try {
    return measure::make_host_runner(target, options);
  } catch (const measure::HostCannotMeasure &e) {
    if (e.is_gpu)
      fail("cannot measure for '" + target.str() + "' on this host: " + e.why +
           ". Run kiln on a host with an NVIDIA GPU of that arch and its driver, or a GPU runner (kiln runner "
           "--target cuda) behind a tracker");
    fail("the local runner cannot measure for target '" + target.str() + "': " + e.why +
         ". Measure on such a device: run `kiln runner --tracker HOST:PORT --key KEY` on it and pass --runner "
         "tracker://HOST:PORT/KEY");
  } catch (const std::exception &e) {
    fail(e.what());
  }
}

std::unique_ptr<measure::Runner> make_runner(TuningArgs &a) {
  if (a.runner == "local") {
    if (a.target.empty()) a.target = "llvm -mcpu=native";
    measure::HostRunnerOptions options;
    options.cpu.run_timeout_seconds = a.run_timeout;
    options.cpu.memory_limit_bytes = a.memory_limit_mb << 20;
    options.cpu.interleave_batches = a.timing_mode == "interleaved";
    options.cuda.run_timeout_seconds = a.run_timeout;
    return make_host_runner(a.target, options);
  }
  try {
    rpc::TrackerUri uri = rpc::parse_tracker_uri(a.runner);
    rpc::RemoteRunnerOptions options;
    options.tracker = a.tracker_client.options(uri.address);
    options.key = uri.key;
    options.queue_deadline_seconds = a.queue_deadline;
    options.run_timeout_seconds = a.run_timeout;
    options.log = &std::cerr;
    const bool target_given = !a.target.empty();
    if (!target_given) a.target = rpc::remote_target(options.tracker, uri.key);
    // The jobs say what they were built for; the tracker matches them to runners.
    Target target = Target::parse(a.target);
    options.target = target.str();
    if (target_given) rpc::check_key_serves_target(options.tracker, uri.key, options.target);
    // GPU artifacts are PTX and cubins, not shared libraries of the CPU runtime's ABI.
    options.abi_version = target.backend().is_gpu() ? 0 : KILN_ABI_VERSION;
    return std::make_unique<rpc::RemoteRunner>(options);
  } catch (const std::exception &e) {
    fail(e.what());
  }
}

std::unique_ptr<costmodel::CostModel> make_cost_model(const TuningArgs &a, const Target &target) {
  if (a.cost_model == "random") return std::make_unique<costmodel::RandomCostModel>(a.options.seed);
  costmodel::XGBoostOptions options;
  // GPU programs' rows carry the GPU columns: a model of their own.
  options.num_features = costmodel::feature_names(target.backend().is_gpu()).size();
  options.loss = a.cost_model_loss == "rank" ? costmodel::Loss::kPairwiseRank : costmodel::Loss::kSquaredError;
  return std::make_unique<costmodel::XGBoostCostModel>(options);
}

void add_tune_op_command(CLI::App &app) {
  auto *cmd = app.add_subcommand(
      "tune-op", "Tune one operator (or a workload file) and store the results; without --op, a BERT dense layer");
  auto a = std::make_shared<TuneArgs>();
  a->workload.add_to(*cmd);
  add_tuning_flags(cmd, *a);
  cmd->callback([a] {
    // A local runner forks its server before any thread exists.
    std::unique_ptr<measure::Runner> runner = make_runner(*a);
    if (a->workload.op.empty() && a->workload.workload_file.empty()) {
      // The embedded default: a BERT-base dense layer with bias (128 tokens, 768 features).
      a->workload.op = "dense";
      a->workload.shapes = {"128x768", "768x768", "768"};
    }
    ops::Workload w;
    Target target;
    try {
      w = a->workload.build();
      target = Target::parse(a->target);
    } catch (const std::exception &e) {
      fail(e.what());
    }
    std::optional<db::Database> database;
    try {
      database.emplace(db::Database::open(a->db, db::OpenMode::kCreate));
    } catch (const std::exception &e) {
      fail(e.what());
    }
    std::filesystem::path work = std::filesystem::temp_directory_path() / ("kiln_tune_" + std::to_string(getpid()));
    // Ctrl-C or SIGTERM still end the run at once (the rounds measured are stored), now
    // without leaving the folder; a SIGKILL's is removed by the next run's pool.
    measure::remove_on_interrupt(work);
    measure::LocalBuilderPool pool(a->builders, work, 60.0);
    std::unique_ptr<costmodel::CostModel> model = make_cost_model(*a, target);
    const scheduler::TuneOptions &opts = a->options;
    std::cerr << "tuning " << w.summary() << " on " << target.str() << " (key " << w.key_hash().substr(0, 16)
              << ", database " << a->db << ")\n";
    scheduler::TuneResult r;
    try {
      scheduler::TaskTuner tuner(w, target, opts, &*database, pool, *runner, *model);
      r = tuner.run([&](const scheduler::Progress &p) {
        if (a->quiet) return;
        std::fprintf(stderr, "\r[round %3lld] trials %5lld/%lld  errors %4lld  best %9.4f ms  %8.2f GFLOP/s  %6.0f s",
                     (long long)p.round, (long long)p.trials, (long long)a->options.trials, (long long)p.errors,
                     p.best_seconds * 1e3, p.best_gflops, p.elapsed_seconds);
        std::fflush(stderr);
      });
      if (!a->quiet && !tuner.passed_over_records().empty()) std::cerr << "\n";
      warn_about_passed_over_records(tuner.passed_over_records());
    } catch (const std::exception &e) {
      std::filesystem::remove_all(work);
      fail(e.what());
    }
    std::filesystem::remove_all(work);
    const scheduler::Progress &p = r.progress;
    if (!a->quiet) std::cerr << "\n";
    std::printf("measured %lld candidates (%lld errors) in %.1f s", (long long)p.trials, (long long)p.errors,
                p.elapsed_seconds);
    if (p.resumed_records > 0)
      std::printf(", after resuming %lld records from %s", (long long)p.resumed_records, a->db.c_str());
    std::printf("\n");
    if (p.best_seconds > 0) {
      std::printf("best: %.4f ms, %.1f GFLOP/s", p.best_seconds * 1e3, p.best_gflops);
      std::fflush(stdout);
      if (r.confirmed > 0)
        std::cout << " (median of its re-timings; the fastest of " << r.confirmed << " programs re-timed side by side)";
      std::cout << "\n";
    } else {
      std::cout << "no valid candidate yet\n";
    }
    for (const std::string &line : r.disagreements) std::fprintf(stderr, "warning: %s\n", line.c_str());
    if (p.warm_start_programs > 0)
      std::cout << "cost model warm-started with " << p.warm_start_programs << " programs of other workloads\n";
    std::printf("time: search %.1f s, features %.1f s, training %.1f s, build %.1f s, run %.1f s, database %.1f s\n",
                p.time.search, p.time.features, p.time.training, p.time.build, p.time.run, p.time.database);
    if (p.time.overlapped > 0.05)
      std::printf("      besides: %.1f s of builds while measurements ran (a GPU or remote runners)\n",
                  p.time.overlapped);
  });
}

}  // namespace kiln::cli
