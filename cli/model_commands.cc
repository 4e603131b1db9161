#include "cli/model_commands.h"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/flag_checks.h"
#include "cli/tune_command.h"
#include "cli/workload_args.h"
#include "executor/compile.h"
#include "executor/model.h"
#include "executor/tensor_file.h"
#include "frontend/fusion.h"
#include "frontend/onnx_import.h"
#include "frontend/passes.h"
#include "frontend/tasks.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "scheduler/report.h"
#include "scheduler/task_scheduler.h"

namespace kiln::cli {

namespace {

struct ImportArgs {
  std::string model;
  std::vector<std::string> shapes;
  bool layout_rewrite = true;
  std::string image_layout = "NHWC";
  bool winograd = true;
  CLI::Option *winograd_flag = nullptr;  // to tell an explicit --winograd from the default
  bool json = false;
};

frontend::ImportOptions options_from(const ImportArgs &args) {
  frontend::ImportOptions options;
  for (const std::string &spec : args.shapes) {
    size_t eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0)
      fail("--shape '" + spec + "' must look like NAME=DIMS, e.g. input=1x3x224x224");
    try {
      options.input_shapes[spec.substr(0, eq)] = ir::parse_shape(spec.substr(eq + 1));
    } catch (const std::invalid_argument &e) {
      fail("--shape '" + spec + "': " + e.what());
    }
  }
  return options;
}

// Imports, runs the passes and fuses: what import and compile share.
struct LoadedGraph {
  frontend::Graph graph;
  std::vector<frontend::Subgraph> subgraphs;
};

LoadedGraph load_graph(const ImportArgs &args) {
  LoadedGraph g;
  try {
    g.graph = frontend::import_onnx_file(args.model, options_from(args));
  } catch (const frontend::ImportError &e) {
    fail(e.what());
  }
  frontend::run_default_passes(g.graph);
  if (args.image_layout == "NHWC") frontend::convert_images_to_nhwc(g.graph);
  if (args.winograd && args.image_layout == "NHWC") frontend::rewrite_winograd_convolutions(g.graph);
  if (args.winograd && args.image_layout != "NHWC" && args.winograd_flag && args.winograd_flag->count() > 0)
    fail("--winograd rewrites NHWC convolutions: use it with --layout NHWC (the default)");
  g.subgraphs = frontend::fuse(g.graph, args.layout_rewrite);
  return g;
}

void add_import_flags(CLI::App &cmd, ImportArgs &args) {
  cmd.add_option("--model", args.model, "ONNX model file (opsets 11-17, weights inside the file)")->required();
  cmd.add_option("--shape", args.shapes,
                 "NAME=DIMS: fix a graph input's shape (needed for dynamic dimensions), e.g. input=1x3x224x224");
  cmd.add_flag("!--no-layout-rewrite", args.layout_rewrite,
               "do not mark the model's weights constant: programs then pack weights on every call instead of "
               "once at load (tasks get other keys; tune and compile with the same choice)");
  cmd.add_option("--layout", args.image_layout,
                 "NCHW|NHWC: the layout convolutions and pools run in; NHWC transposes the model's input once and "
                 "keeps the images channels-last between convolutions (tasks get other keys; tune and compile "
                 "with the same choice)")
      ->check(CLI::IsMember({"NCHW", "NHWC"}))
      ->capture_default_str();
  args.winograd_flag = cmd.add_flag(
      "--winograd,!--no-winograd", args.winograd,
      "with --layout NHWC (the default: on), run 3x3 stride-1 convolutions as Winograd F(2x2,3x3): an input "
      "transform, 16 matrix products with weights transformed at import, an output transform; where that saves "
      "at least half the multiply-adds. --no-winograd keeps them direct (tasks get other keys; tune and compile "
      "with the same choice)");
}

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

void print_tasks(const std::vector<frontend::Task> &tasks) {
  double total = 0;
  for (const frontend::Task &t : tasks) total += t.flops * t.weight;
  std::printf("\n%-3s  %-12s  %-28s  %6s  %9s  %6s\n", "#", "key", "ops  shapes", "weight", "GFLOP", "share");
  for (size_t i = 0; i < tasks.size(); ++i) {
    const frontend::Task &t = tasks[i];
    double flops = t.flops * t.weight;
    std::printf("%-3zu  %-12s  %-28s  %6d  %9.4f  %5.1f%%\n", i, t.key_hash.substr(0, 12).c_str(),
                t.workload.summary().c_str(), t.weight, flops / 1e9, total > 0 ? 100.0 * flops / total : 0.0);
  }
  std::printf("%zu tasks, %.4f GFLOP per inference\n", tasks.size(), total / 1e9);
}

void add_import(CLI::App &app) {
  auto args = std::make_shared<ImportArgs>();
  auto *cmd = app.add_subcommand(
      "import", "Import an ONNX model: print its graph after the passes, its fused subgraphs and its tuning tasks");
  add_import_flags(*cmd, *args);
  cmd->add_flag("--json", args->json, "print the graph, the subgraphs and the tasks as one JSON object");
  cmd->callback([args] {
    auto [graph, subgraphs] = load_graph(*args);
    std::vector<frontend::Task> tasks = frontend::extract_tasks(subgraphs);
    if (args->json) {
      nlohmann::json out{
          {"graph", graph.to_json()}, {"subgraphs", nlohmann::json::array()}, {"tasks", nlohmann::json::array()}};
      for (const frontend::Subgraph &s : subgraphs) out["subgraphs"].push_back(s.workload.summary());
      for (const frontend::Task &t : tasks)
        out["tasks"].push_back({{"key_hash", t.key_hash},
                                {"summary", t.workload.summary()},
                                {"weight", t.weight},
                                {"flops", t.flops},
                                {"workload", t.workload.to_json()}});
      std::cout << out.dump(2) << '\n';
      return;
    }
    std::cout << graph.to_string();
    std::cout << '\n' << subgraphs.size() << " subgraphs:\n";
    for (size_t i = 0; i < subgraphs.size(); ++i)
      std::cout << "  " << i << ": " << subgraphs[i].workload.summary() << '\n';
    print_tasks(tasks);
  });
}

void add_compile(CLI::App &app) {
  auto args = std::make_shared<ImportArgs>();
  auto options = std::make_shared<executor::CompileOptions>();
  auto out = std::make_shared<std::string>();
  auto *cmd = app.add_subcommand("compile",
                                 "Compile an ONNX model into a folder that kiln run loads: each subgraph with "
                                 "its best schedule in the database, or the untuned default");
  add_import_flags(*cmd, *args);
  cmd->add_option("--db", options->db_path, "tuning database to take schedules from (default: none, all untuned)");
  cmd->add_option("--target", options->target, "target to build for")->capture_default_str();
  cmd->add_option("-o,--output", *out, "output folder (replaced if it exists), e.g. m.kiln")->required();
  cmd->add_option("--choose-in-model", options->choose_in_model,
                  "also build each tuned step's next N programs in the database (within 30% of its best) and time "
                  "them inside the compiled model, over the step and the two after it; one at least 2% faster "
                  "there replaces the best (0: off)")
      ->capture_default_str()
      ->check(at_least(0, 64));
  auto threads = std::make_shared<int>(0);
  cmd->add_option("--threads", *threads,
                  "threads to time programs with for --choose-in-model: those the model will run with (default: "
                  "all cores)")
      ->check(at_least(1, 1024));
  cmd->callback([args, options, out, threads] {
    auto [graph, subgraphs] = load_graph(*args);
    if (*threads > 0) executor::Model::set_threads(*threads);
    if (options->choose_in_model > 0 && options->db_path.empty())
      fail("--choose-in-model chooses among a database's programs: give it one with --db");
    auto chosen = [](const executor::InModelChoice &c) {
      if (c.chosen_rank == 0)
        std::fprintf(stderr, "step %zu (%s): kept the best of %zu programs tried inside the model (%.3f ms)\n", c.step,
                     c.workload.c_str(), c.tried + 1, c.window_ms);
      else
        std::fprintf(stderr,
                     "step %zu (%s): program %zu of the database's ranking runs its window in %.3f ms "
                     "instead of %.3f ms\n",
                     c.step, c.workload.c_str(), c.chosen_rank + 1, c.chosen_window_ms, c.window_ms);
    };
    executor::CompileReport report;
    try {
      // A counter redrawn in place on a terminal; elsewhere (a log) nothing per subgraph.
      bool tty = isatty(STDERR_FILENO);
      report = executor::compile_model(
          graph, subgraphs, *options, *out,
          [tty](size_t done, size_t total) {
            if (!tty) return;
            std::fprintf(stderr, "\rcompiling subgraph %zu/%zu", done, total);
            if (done == total) std::fprintf(stderr, "\n");
          },
          chosen);
    } catch (const std::exception &e) {
      fail(e.what());
    }
    std::printf("compiled %zu subgraphs into %s in %.1f s: %zu with tuned schedules, %zu untuned\n", report.subgraphs,
                out->c_str(), report.seconds, report.tuned, report.untuned);
    std::printf("activation memory: %.2f MB planned (%.2f MB with a buffer per tensor)\n", report.arena_bytes / 1e6,
                report.unplanned_bytes / 1e6);
    if (options->choose_in_model > 0) {
      size_t changed = 0;
      for (const executor::InModelChoice &c : report.in_model) changed += c.chosen_rank != 0;
      std::printf("inside the model: %zu of %zu steps with other programs took one of them\n", changed,
                  report.in_model.size());
    }
  });
}

ir::HostTensor read_tensor(const std::string &path, const ir::TensorType &type) {
  try {
    return executor::read_tensor_file(path, type);
  } catch (const executor::TensorFileError &e) {
    fail(e.what());
  }
}

executor::Model load_model(const std::string &dir) {
  try {
    return executor::Model::load(dir);
  } catch (const executor::ModelError &e) {
    fail(e.what());
  }
}

void add_run(CLI::App &app) {
  struct RunArgs {
    std::string model, input, output, compare;
    double tolerance = 1e-4;
  };
  auto args = std::make_shared<RunArgs>();
  auto *cmd = app.add_subcommand("run", "Run a compiled model once on an input file");
  cmd->add_option("--model", args->model, "compiled model folder (kiln compile)")->required();
  cmd->add_option("--input", args->input,
                  "the model's input: a .npy file (C order; float64 converts to float32) or raw little-endian "
                  "bytes in the input's shape")
      ->required();
  cmd->add_option("--output", args->output, "write the output there: .npy when the name ends in .npy, else raw");
  cmd->add_option("--compare", args->compare,
                  "reference output (.npy or raw): print the error, fail beyond --tolerance");
  cmd->add_option("--tolerance", args->tolerance, "largest relative L2 error --compare accepts")
      ->capture_default_str()
      ->check(finite_range(0, 1e6));
  cmd->callback([args] {
    executor::Model model = load_model(args->model);
    if (model.input_types().size() != 1)
      fail("kiln run feeds one input; this model has " + std::to_string(model.input_types().size()));
    ir::HostTensor input = read_tensor(args->input, model.input_types()[0]);
    auto start = std::chrono::steady_clock::now();
    std::vector<ir::HostTensor> outputs;
    try {
      outputs = model.run({input});
    } catch (const executor::ModelError &e) {
      fail(e.what());
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const ir::HostTensor &out = outputs.at(0);
    std::printf("output '%s': %s %s, %.3f ms\n", model.output_names()[0].c_str(),
                frontend::shape_string(out.shape()).c_str(), ir::dtype_name(out.dtype()), ms);
    if (!args->output.empty()) {
      try {
        executor::write_tensor_file(args->output, out);
      } catch (const executor::TensorFileError &e) {
        fail(e.what());
      }
    }
    if (!args->compare.empty()) {
      ir::HostTensor want = read_tensor(args->compare, {out.shape(), out.dtype()});
      double max_abs = 0;
      for (int64_t i = 0; i < out.size(); ++i) max_abs = std::max(max_abs, std::fabs(out.get(i) - want.get(i)));
      double rel = ir::relative_l2_error(out, want);
      std::printf("compare: max abs error %.3g, relative L2 error %.3g (tolerance %.3g)\n", max_abs, rel,
                  args->tolerance);
      if (!(rel <= args->tolerance)) fail("the output differs from '" + args->compare + "' beyond the tolerance");
    }
  });
}

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

void add_bench(CLI::App &app) {
  struct BenchArgs {
    std::string model;
    int threads = 0;
    int repeat = 50;
    bool profile = false;
  };
  auto args = std::make_shared<BenchArgs>();
  auto *cmd = app.add_subcommand("bench", "Time a compiled model on random inputs: median and min over repeats");
  cmd->add_option("--model", args->model, "compiled model folder (kiln compile)")->required();
  cmd->add_option("--threads", args->threads, "threads of the runtime pool (default: all cores)")
      ->check(at_least(1, 1024));
  cmd->add_option("--repeat", args->repeat, "timed inferences after 3 warm-up runs")
      ->capture_default_str()
      ->check(at_least(1, 1000000));
  cmd->add_flag("--profile", args->profile,
                "then time every step inside the inferences (R more runs) and compare it with the latency its "
                "kernel was tuned to");
  cmd->callback([args] {
    executor::Model model = load_model(args->model);
    if (args->threads > 0) executor::Model::set_threads(args->threads);
    std::vector<ir::HostTensor> inputs = model.random_inputs();
    std::vector<double> ms;
    try {
      for (int i = 0; i < 3; ++i) model.run(inputs);
      for (int i = 0; i < args->repeat; ++i) {
        auto start = std::chrono::steady_clock::now();
        model.run(inputs);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    } catch (const executor::ModelError &e) {
      fail(e.what());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s: %zu subgraphs, median %.3f ms, min %.3f ms over %d runs\n", args->model.c_str(), model.num_steps(),
                ms[ms.size() / 2], ms.front(), args->repeat);
    if (args->profile) {
      std::vector<double> step_ms;
      try {
        step_ms = model.profile_steps(args->repeat);
      } catch (const executor::ModelError &e) {
        fail(e.what());
      }
      print_step_profile(model.steps(), step_ms, args->repeat);
    }
  });
}

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

void add_tune(CLI::App &app) {
  struct ModelTuneArgs : TuningArgs {
    ImportArgs model;
    std::string allocation = "gradient";
    int early_stop = scheduler::SchedulerOptions{}.early_stop_rounds;
    int warmup_batch = scheduler::SchedulerOptions{}.warmup_batch;
    int warmup_trials = scheduler::SchedulerOptions{}.warmup_trials;
    bool measure = true;
    std::string report;
  };
  auto a = std::make_shared<ModelTuneArgs>();
  // A model has many tasks: re-time fewer programs per task than one operator does.
  a->options.confirm_top = 4;
  auto *cmd = app.add_subcommand("tune",
                                 "Tune every task of an ONNX model with the task scheduler, store the results in "
                                 "the database, and measure the model before and after");
  add_import_flags(*cmd, a->model);
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
                  "--batch)")
      ->capture_default_str()
      ->check(at_least(1, 4096));
  cmd->add_option("--warmup-trials", a->warmup_trials,
                  "gradient scheduler: then every task without programs in the database gets this many candidates "
                  "of its own, the largest share of the estimated latency first, before the rule allocates (-1: "
                  "one --batch; 0: none)")
      ->capture_default_str()
      ->check(at_least(-1, 1000000));
  cmd->add_option("--share", a->options.evolution.max_adopted,
                  "a task's new best is offered to the tasks whose schedules sample the same way (the same "
                  "operator with another epilogue or shape); each keeps this many offers to measure in its next "
                  "round (0: tasks share nothing)")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_flag("!--no-measure", a->measure, "skip compiling and timing the model untuned and tuned at the end");
  cmd->add_option("--report", a->report,
                  "write an HTML report of the job to this folder (index.html: latency curves, task table, time)");
  cmd->callback([a] {
    // A local runner forks its server before any thread exists.
    std::unique_ptr<measure::Runner> runner = make_runner(*a);
    auto [graph, subgraphs] = load_graph(a->model);
    std::vector<frontend::Task> tasks = frontend::extract_tasks(subgraphs);
    Target target;
    std::optional<db::Database> database;
    try {
      target = Target::parse(a->target);
      database.emplace(db::Database::open(a->db, db::OpenMode::kCreate));
    } catch (const std::exception &e) {
      fail(e.what());
    }
    std::vector<scheduler::TaskScheduler::Task> jobs;
    for (const frontend::Task &t : tasks) jobs.push_back({t.workload, t.weight});
    scheduler::SchedulerOptions options;
    options.trials = a->options.trials;
    options.time_limit_seconds = a->options.time_limit_seconds;
    options.allocation =
        a->allocation == "gradient" ? scheduler::Allocation::kGradient : scheduler::Allocation::kRoundRobin;
    options.early_stop_rounds = a->early_stop;
    options.warmup_batch = a->warmup_batch;
    options.warmup_trials = a->warmup_trials;
    options.task = a->options;
    std::filesystem::path work = std::filesystem::temp_directory_path() / ("kiln_tune_" + std::to_string(getpid()));
    measure::LocalBuilderPool pool(a->builders, work, 60.0);
    std::unique_ptr<costmodel::CostModel> model = make_cost_model(*a);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    std::cerr << "tuning " << tasks.size() << " tasks of " << a->model.model << " on " << target.str() << " (database "
              << a->db << ", " << a->options.trials << " trials)\n";
    bool tty = isatty(STDERR_FILENO);
    scheduler::ReportBudget budget{options.trials, options.time_limit_seconds};
    size_t table_lines = 0;  // of the live table last drawn
    scheduler::SchedulerResult result;
    try {
      scheduler::TaskScheduler ts(jobs, target, options, &*database, pool, *runner, *model);
      result = ts.run(
          [&](const scheduler::SchedulerProgress &p) {
            if (a->quiet) return;
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
          [] { return interrupted.load(); });
    } catch (const std::exception &e) {
      std::filesystem::remove_all(work);
      fail(e.what());
    }
    std::filesystem::remove_all(work);
    if (interrupted)
      std::cerr << "interrupted: stopped after the running round; every measurement is stored, a rerun resumes\n";
    const scheduler::SchedulerProgress &p = result.progress;
    std::fputs(scheduler::progress_table(p, budget).c_str(), stdout);
    scheduler::TimeBreakdown time = scheduler::total_time(result);
    std::printf("measured %lld candidates in %.0f s (%.1f trials/s); estimated model latency %s\n", (long long)p.trials,
                p.elapsed_seconds, p.elapsed_seconds > 0 ? p.trials / p.elapsed_seconds : 0.0,
                trimmed(estimate_text(p)).c_str());
    std::printf("time: search %.1f s, features %.1f s, training %.1f s, build %.1f s, run %.1f s, database %.1f s\n",
                time.search, time.features, time.training, time.build, time.run, time.database);
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
        std::cout << "report: " << scheduler::write_html_report(a->report, result, report).string() << "\n";
      } catch (const std::exception &e) {
        fail(e.what());
      }
    };
    if (!a->measure || interrupted) {
      write_report();
      return;
    }
    // The model measured, not estimated: untuned defaults and tuned, alternating.
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("kiln_tune_models_" + std::to_string(getpid()));
    try {
      database.reset();
      executor::compile_model(graph, subgraphs, {target.str(), ""}, (dir / "untuned").string());
      executor::compile_model(graph, subgraphs, {target.str(), a->db}, (dir / "tuned").string());
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
      std::printf("measured model latency: untuned %.3f ms, tuned %.3f ms (%.2fx), medians of 3 alternating blocks\n",
                  before[1], after[1], before[1] / after[1]);
      report.measured = scheduler::MeasuredModel{before[1], after[1]};
    } catch (const std::exception &e) {
      std::filesystem::remove_all(dir);
      fail(std::string("measuring the model: ") + e.what());
    }
    std::filesystem::remove_all(dir);
    write_report();
  });
}

}  // namespace

void add_model_commands(CLI::App &app) {
  add_import(app);
  add_tune(app);
  add_compile(app);
  add_run(app);
  add_bench(app);
}

}  // namespace kiln::cli
