#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "cli/pipeline_args.h"
#include "cli/tune_op_command.h"
#include "device/cuda_driver.h"
#include "executor/compile.h"
#include "executor/model.h"
#include "frontend/tasks.h"
#include "measure/local_builder_pool.h"
#include "scheduler/report.h"
#include "scheduler/task_scheduler.h"
#include "search/space.h"
#include "support/clock.h"
#include "support/flag_checks.h"

namespace kiln::cli {

namespace {

// "0.4494 ms", or why there is no estimate yet: a task without a measured program.
std::string estimate_text(const scheduler::SchedulerProgress &p) {
  if (p.estimated_latency > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%10.4f ms", p.estimated_latency * 1e3);
    return text;
  }
  size_t without = 0;
  for (const scheduler::TaskState &t : p.tasks) without += t.progress.best_seconds > 0 ? 0 : 1;
  return "not yet (" + std::to_string(without) + " of " + std::to_string(p.tasks.size()) +
         " tasks without a measured program)";
}

std::string trimmed(std::string text) { return text.erase(0, text.find_first_not_of(' ')); }

std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) { interrupted = true; }

// Median of `runs` timed inferences, after warm-up.
double median_ms(executor::Model &model, const std::vector<ir::HostTensor> &inputs, int runs) {
  for (int i = 0; i < 2; ++i) model.run(inputs);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    model.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

void add_tune_model_command(CLI::App &app) {
  struct ModelTuneArgs : TuningArgs {
    PipelineArgs model;
    std::string allocation = "gradient";
    int early_stop = scheduler::SchedulerOptions{}.early_stop_rounds;
    int warmup_batch = scheduler::SchedulerOptions{}.warmup_batch;
    int warmup_trials = scheduler::SchedulerOptions{}.warmup_trials;
    double unconfirmed_share = scheduler::SchedulerOptions{}.unconfirmed_share;
    int64_t last_offers = scheduler::SchedulerOptions{}.last_offers;
    bool measure = true;
    std::string report;
  };
  auto a = std::make_shared<ModelTuneArgs>();
  // A model has many tasks: re-time fewer programs per task than one operator does.
  a->options.confirm_top = 4;
  auto *cmd = app.add_subcommand("tune",
                                 "Tune every task of an ONNX model with the task scheduler, store the results in "
                                 "the database, and measure the model before and after");
  add_pipeline_flags(*cmd, a->model);
  add_tuning_flags(cmd, *a);
  cmd->add_option("--task-scheduler", a->allocation,
                  "how rounds are given to tasks: gradient (expected gain in model latency) or round-robin (ablation)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gradient", "round-robin"}));
  cmd->add_option("--early-stop", a->early_stop, "rounds of a task without improvement before it stops (0: never)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--warmup-batch", a->warmup_batch,
                  "gradient scheduler: candidates in a task's rounds until it has a measured program (at most "
                  "--batch; the first is the untuned default); -1: 8, or fewer (at least 2) where tasks x 8 would "
                  "take more than half of --trials")
      ->capture_default_str()
      ->check(at_least(-1, 4096));
  cmd->add_option("--warmup-trials", a->warmup_trials,
                  "gradient scheduler: then every task without programs in the database gets this many candidates "
                  "of its own, the largest share of the estimated latency first, before the rule allocates (-1: "
                  "one --batch, or fewer where tasks x --batch would take more than half of --trials; 0: none)")
      ->capture_default_str()
      ->check(at_least(-1, 1000000));
  cmd->add_option("--last-offers", a->last_offers,
                  "gradient scheduler: trials per task kept for the end of the job (a quarter of --trials at most), "
                  "when each task measures up to this many programs other tasks offered it since its last round "
                  "(see --share); 0: none")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--unconfirmed-share", a->unconfirmed_share,
                  "the tasks of smallest share of the estimated latency that together hold at most this share of it "
                  "skip the re-timing of their fastest programs at the end (--confirm-top; 0: every task is "
                  "re-timed)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--share", a->options.evolution.max_adopted,
                  "a task's new best is offered to the tasks whose schedules sample the same way (the same "
                  "operator with another epilogue or shape); each keeps this many offers to measure in its next "
                  "round (0: tasks share nothing)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_flag_callback(
      "--no-measure", [a] { a->measure = false; }, "skip compiling and timing the model untuned and tuned at the end");
  cmd->add_option("--report", a->report,
                  "write an HTML report of the job to this folder (index.html: latency curves, task table, time)");
  cmd->callback([a] {
    const double job_start = support::now_seconds();
    // Checked before the job, not found after hours of it.
    if (!a->report.empty()) {
      try {
        scheduler::check_report_folder(a->report);
      } catch (const std::exception &e) {
        fail(std::string("--report: ") + e.what());
      }
    }
    // A local runner forks its server before any thread exists.
    std::unique_ptr<measure::Runner> runner = make_runner(*a);
    // A model with dynamic dimensions is tuned as the union of its buckets' tasks, each
    // weighted by how often a call runs its bucket (the expected latency).
    const bool dynamic = has_dynamic_dims(a->model);
    frontend::PreparedModel prepared;
    std::optional<DynamicPlan> plan;
    std::vector<frontend::Task> tasks;
    std::vector<double> task_weights;
    if (dynamic) {
      plan = plan_dynamic(a->model);
      std::map<std::string, size_t> by_key;
      for (size_t b = 0; b < plan->manifest.buckets.size(); ++b) {
        if (plan->bucket_weights[b] <= 0) continue;  // no expected value runs it
        frontend::PreparedModel bucket = prepare_bucket(a->model, *plan, b);
        prepared.options = bucket.options;
        for (frontend::Task &t : frontend::extract_tasks(bucket.subgraphs)) {
          const double weight = plan->bucket_weights[b] * t.weight;
          auto [it, fresh] = by_key.emplace(t.key_hash, tasks.size());
          if (fresh) {
            tasks.push_back(std::move(t));
            task_weights.push_back(weight);
          } else {
            task_weights[it->second] += weight;
          }
        }
      }
      std::fprintf(stderr, "%zu buckets:", plan->manifest.buckets.size());
      for (size_t b = 0; b < plan->manifest.buckets.size(); ++b)
        std::fprintf(stderr, " %s (%.1f%% of calls)", plan->manifest.bucket_folder(b).c_str(),
                     100 * plan->bucket_weights[b]);
      std::fprintf(stderr, "\n");
    } else {
      prepared = prepare_model(a->model);
      tasks = frontend::extract_tasks(prepared.subgraphs);
      for (const frontend::Task &t : tasks) task_weights.push_back(t.weight);
    }
    Target target;
    std::optional<db::Database> database;
    try {
      target = Target::parse(a->target);
      database.emplace(db::Database::open(a->db, db::OpenMode::kCreate));
    } catch (const std::exception &e) {
      fail(e.what());
    }
    std::vector<scheduler::TaskScheduler::Task> jobs;
    for (size_t i = 0; i < tasks.size(); ++i) jobs.push_back({tasks[i].workload, task_weights[i]});
    scheduler::SchedulerOptions options;
    options.trials = a->options.trials;
    options.time_limit_seconds = a->options.time_limit_seconds;
    options.allocation =
        a->allocation == "gradient" ? scheduler::Allocation::kGradient : scheduler::Allocation::kRoundRobin;
    options.early_stop_rounds = a->early_stop;
    options.warmup_batch = a->warmup_batch;
    options.warmup_trials = a->warmup_trials;
    options.unconfirmed_share = a->unconfirmed_share;
    options.last_offers = a->last_offers;
    options.task = a->options;
    options.task.pipeline = prepared.options.to_json();
    std::filesystem::path work = std::filesystem::temp_directory_path() / ("kiln_tune_" + std::to_string(getpid()));
    measure::LocalBuilderPool pool(a->builders, work, 60.0);
    std::unique_ptr<costmodel::CostModel> model = make_cost_model(*a, target);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    std::cerr << "tuning " << tasks.size() << " tasks of " << a->model.model << " on " << target.str() << " (database "
              << a->db << ", " << a->options.trials << " trials)\n";
    bool tty = isatty(STDERR_FILENO);
    scheduler::ReportBudget budget{options.trials, options.time_limit_seconds};
    size_t table_lines = 0;  // of the live table last drawn
    bool told_resumed = false;
    scheduler::SchedulerResult result;
    try {
      scheduler::TaskScheduler ts(jobs, target, options, &*database, pool, *runner, *model);
      result = ts.run(
          [&](const scheduler::SchedulerProgress &p) {
            if (a->quiet) return;
            if (!told_resumed) {
              // Once, before the first table: what a rerun picked up, per task.
              told_resumed = true;
              std::string per_task;
              int64_t total = 0;
              for (size_t i = 0; i < p.tasks.size(); ++i) {
                int64_t n = p.tasks[i].progress.resumed_records;
                if (n == 0) continue;
                total += n;
                per_task += (per_task.empty() ? "" : ", ") + ("#" + std::to_string(i)) + " " + std::to_string(n);
              }
              if (total > 0)
                std::fprintf(stderr, "resumed %lld records from %s (task: records): %s\n", (long long)total,
                             a->db.c_str(), per_task.c_str());
            }
            if (tty) {
              // One table, redrawn in place: up over the last one, clear, draw.
              std::string table = scheduler::progress_table(p, budget);
              if (table_lines > 0) std::fprintf(stderr, "\x1b[%zuA\x1b[J", table_lines);
              std::fputs(table.c_str(), stderr);
              table_lines = static_cast<size_t>(std::count(table.begin(), table.end(), '\n'));
            } else {
              double rate = p.elapsed_seconds > 0 ? static_cast<double>(p.trials) / p.elapsed_seconds : 0;
              std::fprintf(stderr,
                           "[round %4lld] trials %6lld/%lld  estimated model latency %s  %5.1f trials/s  %6.0f s\n",
                           (long long)p.round, (long long)p.trials, (long long)a->options.trials,
                           estimate_text(p).c_str(), rate, p.elapsed_seconds);
            }
            std::fflush(stderr);
          },
          [] { return interrupted.load(); },
          [&](size_t task, size_t count) {
            // After the last round (ETA 0s) the job re-times each task's best programs.
            if (a->quiet || a->options.confirm_top <= 0) return;
            if (tty)
              std::fprintf(stderr, "\rre-timing the fastest programs of each task side by side: task %zu/%zu", task + 1,
                           count);
            else if (task == 0)
              std::fprintf(stderr, "re-timing the fastest programs of each task side by side (--confirm-top %d)\n",
                           a->options.confirm_top);
            if (tty && task + 1 == count) std::fprintf(stderr, "\r\x1b[K");
            std::fflush(stderr);
          });
      warn_about_passed_over_records(ts.passed_over_records());
    } catch (const std::exception &e) {
      std::filesystem::remove_all(work);
      fail(e.what());
    }
    std::filesystem::remove_all(work);
    if (interrupted)
      std::cerr << "interrupted: stopped after the running round; every measurement is stored, a rerun resumes\n";
    const scheduler::SchedulerProgress &p = result.progress;
    // The final table replaces the live one when both go to the same terminal.
    if (tty && isatty(STDOUT_FILENO) && table_lines > 0) std::fprintf(stderr, "\x1b[%zuA\x1b[J", table_lines);
    std::fputs(scheduler::progress_table(p, budget).c_str(), stdout);
    scheduler::TimeBreakdown time = scheduler::total_time(result);
    std::printf(
        "measured %lld candidates in %.0f s (%.1f trials/s); estimated model latency %s (the sum of each task's "
        "best kernel, timed alone)\n",
        (long long)p.trials, p.elapsed_seconds, p.elapsed_seconds > 0 ? p.trials / p.elapsed_seconds : 0.0,
        trimmed(estimate_text(p)).c_str());
    const double accounted = time.search + time.features + time.training + time.build + time.run + time.database;
    const double job_so_far = support::now_seconds() - job_start;
    std::printf(
        "time: search %.1f s, features %.1f s, training %.1f s, build %.1f s, run %.1f s, database %.1f s, else %.1f "
        "s (preparing, scheduling, re-timing): %.1f s\n",
        time.search, time.features, time.training, time.build, time.run, time.database,
        std::max(0.0, job_so_far - accounted), job_so_far);
    if (time.overlapped > 0.05)
      std::printf("      besides: %.1f s of builds while measurements ran (a GPU or remote runners)\n",
                  time.overlapped);
    // A budget that barely gives every task its first programs tunes little: say so, with
    // a budget that tunes (the search needs a few rounds per task after the warm-up).
    constexpr int64_t kTrialsPerTask = 64;
    const auto task_count = static_cast<int64_t>(tasks.size());
    if (p.trials < kTrialsPerTask * task_count && !interrupted)
      std::printf(
          "note: %lld trials for %lld tasks mostly gave each task its first programs; for tuned results give "
          "--trials %lld or more (%lld per task; jobs of thousands per task find faster programs), a rerun "
          "resumes\n",
          (long long)p.trials, (long long)task_count, (long long)(kTrialsPerTask * task_count * 4),
          (long long)(kTrialsPerTask * 4));
    for (const scheduler::TuneResult &t : result.tasks)
      for (const std::string &line : t.disagreements) std::fprintf(stderr, "warning: %s\n", line.c_str());
    int64_t shared = 0, shared_best = 0;
    for (const scheduler::TuneResult &t : result.tasks) {
      shared += t.progress.adopted;
      shared_best += t.progress.adopted_best;
    }
    if (shared > 0)
      std::printf("shared between tasks: %lld program%s measured on a sibling task, %lld of them became its best\n",
                  (long long)shared, shared == 1 ? "" : "s", (long long)shared_best);
    scheduler::ReportContext report{a->model.model, target.str(), a->allocation, budget, std::nullopt};
    auto write_report = [&] {
      if (a->report.empty()) return;
      try {
        report.job_seconds = support::now_seconds() - job_start;
        std::cout << "report: " << scheduler::write_html_report(a->report, result, report).string() << "\n";
      } catch (const std::exception &e) {
        fail(e.what());
      }
    };
    // The step after tuning, ready to paste: the target only when it is not this host.
    const bool this_host = target.str() == Target::parse("llvm -mcpu=native").str();
    const std::string next = compile_command_line(a->model, a->db, this_host ? std::string() : target.str());
    auto print_next = [&] { std::printf("next: %s\n", next.c_str()); };
    if (dynamic && a->measure && !interrupted) {
      // Each bucket is a compiled model of its own: time it at the values that matter.
      std::printf(
          "model not measured: it has dynamic dimensions; compile it (next) and time it at a value with "
          "kiln bench --compiled DIR --dim NAME=VALUE\n");
      write_report();
      print_next();
      return;
    }
    if (!a->measure || interrupted) {
      write_report();
      print_next();
      return;
    }
    if (std::string why; target.backend().kind() == BackendKind::kCuda && !device::CudaDriver::open(0, &why)) {
      // Tuned through runners elsewhere: the model runs where its GPU is.
      std::printf(
          "model not measured: %s; compile it (next) and time it on the GPU's host with kiln bench --compiled DIR\n",
          why.c_str());
      write_report();
      print_next();
      return;
    }
    // The model measured, not estimated: untuned defaults and tuned, alternating.
    if (!a->quiet) std::fprintf(stderr, "measuring the model: compiling it untuned and tuned, then timing both\n");
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("kiln_tune_models_" + std::to_string(getpid()));
    try {
      database.reset();
      executor::compile_model(prepared, {target.str(), "", search::untuned_schedule, {}}, (dir / "untuned").string());
      executor::compile_model(prepared, {target.str(), a->db, search::untuned_schedule, {}}, (dir / "tuned").string());
      executor::Model untuned = executor::Model::load((dir / "untuned").string());
      executor::Model tuned = executor::Model::load((dir / "tuned").string());
      std::vector<ir::HostTensor> inputs = tuned.random_inputs();
      std::vector<double> before, after;
      for (int block = 0; block < 3; ++block) {
        before.push_back(median_ms(untuned, inputs, 5));
        after.push_back(median_ms(tuned, inputs, 5));
      }
      std::sort(before.begin(), before.end());
      std::sort(after.begin(), after.end());
      std::string versus_estimate = "no task has a timed program, so there is no estimate to compare with";
      if (p.estimated_latency > 0) {
        char ratio[64];
        std::snprintf(ratio, sizeof ratio, "%.2fx", after[1] / (p.estimated_latency * 1e3));
        versus_estimate = std::string("the tuned model runs ") + ratio + " its estimate";
      }
      std::printf(
          "measured model latency: untuned %.3f ms, tuned %.3f ms (%.2fx), medians of 3 alternating blocks; %s\n",
          before[1], after[1], before[1] / after[1], versus_estimate.c_str());
      report.measured = scheduler::MeasuredModel{before[1], after[1]};
    } catch (const std::exception &e) {
      std::filesystem::remove_all(dir);
      fail(std::string("measuring the model: ") + e.what());
    }
    std::filesystem::remove_all(dir);
    write_report();
    print_next();
  });
}

}  // namespace kiln::cli
