#include "cli/costmodel_command.h"

#include "support/flag_checks.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/workload_args.h"
#include "costmodel/cost_model.h"
#include "costmodel/evaluation.h"
#include "costmodel/features.h"
#include "database/database.h"
#include "ops/workload.h"
#include "scheduler/measured_programs.h"
#include "scheduler/task_tuner.h"
#include "target/target.h"

namespace kiln::cli {

namespace {

struct EvalArgs {
  std::string db;
  std::string target;
  double test_fraction = 0.2;
  uint64_t seed = 0;
  std::string split = "record";
  std::string loss = "rank";
  std::string labels = "fastest";
  bool per_task = false;
  costmodel::XGBoostOptions model;
};

void print_report(const char *name, const costmodel::RankingReport &r) {
  std::printf("%-8s pairwise accuracy %.3f (pooled %.3f)   spearman %.3f   top-1 %.3f   top-5 %.3f\n", name,
              r.pairwise_accuracy, r.pooled_pairwise_accuracy, r.spearman, r.top1, r.top5);
}

// Where the average comes from: a task with few test programs, or with programs whose
// timings lie within the host's noise of each other, weighs as much as any other.
void print_per_task(const costmodel::RankingReport &r, const std::map<std::string, std::string> &summaries) {
  std::printf("\nper task (xgboost; distinct: pairs %.0f%% or more apart, near ties: the share closer)\n",
              costmodel::kDistinctPairRatio * 100);
  std::printf("%-44s %7s %9s %9s %10s %9s %6s\n", "task", "test", "pairwise", "distinct", "near ties", "spearman",
              "top-1");
  std::vector<const costmodel::TaskRanking *> rows;
  for (const costmodel::TaskRanking &t : r.per_task) rows.push_back(&t);
  std::stable_sort(rows.begin(), rows.end(), [](auto *a, auto *b) { return a->samples > b->samples; });
  for (const costmodel::TaskRanking *t : rows) {
    auto it = summaries.find(t->task);
    std::string name = it == summaries.end() ? t->task : it->second;
    if (name.size() > 44) name = name.substr(0, 41) + "...";
    std::printf("%-44s %7zu %9.3f %9.3f %10.3f %9.3f %6.3f\n", name.c_str(), t->samples, t->pairwise_accuracy,
                t->distinct_pairwise_accuracy, t->near_tie_share, t->spearman, t->top1);
  }
}

void run_eval(const EvalArgs &args) {
  std::string target;
  std::optional<costmodel::GpuLimits> gpu;
  try {
    Target parsed = Target::parse(args.target);
    target = parsed.str();
    if (parsed.backend().is_gpu()) gpu = scheduler::gpu_limits_of(parsed);
  } catch (const std::exception &e) {
    fail(std::string("bad --target: ") + e.what());
  }
  if (!std::filesystem::exists(args.db)) fail("database '" + args.db + "' does not exist");
  if (!(args.test_fraction > 0 && args.test_fraction < 1)) fail("--test-fraction must be between 0 and 1");
  costmodel::HoldoutOptions options;
  options.test_fraction = args.test_fraction;
  options.seed = args.seed;
  options.split = args.split == "task" ? costmodel::SplitBy::kTask : costmodel::SplitBy::kRecord;
  options.model = args.model;
  options.model.loss = args.loss == "squared" ? costmodel::Loss::kSquaredError : costmodel::Loss::kPairwiseRank;
  options.model.num_features = costmodel::feature_names(gpu.has_value()).size();

  scheduler::MeasuredPrograms loaded;
  try {
    auto database = db::Database::open(args.db, db::OpenMode::kReadOnly);
    scheduler::LoadOptions load;
    load.labels = args.labels == "fastest"    ? scheduler::LatencyLabel::kFastestRepeat
                  : args.labels == "anchored" ? scheduler::LatencyLabel::kAnchoredMean
                                              : scheduler::LatencyLabel::kMeasuredMean;
    loaded = scheduler::load_measured_programs(database, target, load);
  } catch (const std::exception &e) {
    fail("cannot read database '" + args.db + "': " + e.what());
  }
  if (loaded.records_for_target == 0) fail("database '" + args.db + "' has no records for target '" + target + "'");
  if (loaded.unreplayable > 0) {
    std::fprintf(stderr, "kiln: warning: %zu traces did not replay and were skipped; the first: %s\n",
                 loaded.unreplayable, loaded.first_replay_error.c_str());
  }
  if (loaded.programs.size() < 2) {
    fail("database '" + args.db + "' has " + std::to_string(loaded.programs.size()) +
         " usable successful records for target '" + target + "'; evaluation needs at least 2");
  }

  costmodel::Measurements data;
  data.programs = costmodel::extract_features_batch(loaded.programs, 0, gpu ? &*gpu : nullptr);
  data.throughputs = costmodel::throughputs_of(loaded.latencies);
  data.tasks = loaded.tasks;
  size_t failed = 0;
  for (const auto &f : data.programs) failed += f.ok() ? 0 : 1;

  costmodel::HoldoutResult result;
  try {
    result = costmodel::evaluate_holdout(data, options);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  std::map<std::string, int> task_count;
  for (const std::string &t : data.tasks) task_count[t]++;
  std::printf("target   %s\n", target.c_str());
  std::printf(
      "records  %zu for the target: %zu programs in %zu tasks, %zu error records, %zu traces not replayable, "
      "%zu programs without features\n",
      loaded.records_for_target, data.size(), task_count.size(), loaded.errors, loaded.unreplayable, failed);
  std::printf(
      "model    %s loss (pack-sum), depth %d, eta %g, at most %d rounds, min_child_weight %g, %d leaves, %d bins\n",
      options.model.loss == costmodel::Loss::kSquaredError ? "squared-error" : "pairwise-rank", options.model.max_depth,
      options.model.eta, options.model.max_rounds, options.model.min_child_weight, options.model.max_leaves,
      options.model.max_bin);
  std::printf("labels   %s\n", args.labels == "fastest"    ? "fastest repeat of each record (anchored)"
                               : args.labels == "anchored" ? "mean of each record's repeats (anchored)"
                                                           : "mean of each record's repeats as measured");
  std::printf("split    by %s, seed %llu: %zu train, %zu test (%zu test tasks)\n", args.split.c_str(),
              static_cast<unsigned long long>(args.seed), result.train_samples, result.test_samples,
              result.model.tasks);
  std::printf("training %d rounds in %.2f s\n", result.rounds, result.train_seconds);
  print_report("xgboost", result.model);
  print_report("random", result.random);
  if (args.per_task) print_per_task(result.model, loaded.summaries);
}

}  // namespace

void add_costmodel_command(CLI::App &app) {
  auto *cmd = app.add_subcommand("costmodel", "Evaluate the learned cost model");
  cmd->require_subcommand(1);
  auto *eval = cmd->add_subcommand(
      "eval", "Train the cost model on part of a database's records and report how well it ranks the rest");
  auto args = std::make_shared<EvalArgs>();
  eval->add_option("--db", args->db, "tuning database (SQLite file)")->required();
  eval->add_option("--target", args->target, "target whose records to use, e.g. 'llvm -mcpu=native -num-cores=2'")
      ->required();
  eval->add_option("--test-fraction", args->test_fraction, "share of records (or tasks) held out for testing")
      ->capture_default_str();
  eval->add_option("--seed", args->seed, "seed of the split")->capture_default_str();
  eval->add_option("--split", args->split,
                   "record: hold out random records (tasks seen in training); task: hold out whole tasks")
      ->check(CLI::IsMember({"record", "task"}))
      ->capture_default_str();
  eval->add_option("--loss", args->loss,
                   "rank: logistic loss on the order of pairs within a task; squared: squared error on normalized "
                   "throughput (Ansor's)")
      ->check(CLI::IsMember({"rank", "squared"}))
      ->capture_default_str();
  eval->add_option("--labels", args->labels,
                   "fastest: each record's fastest repeat, anchored (what tuning trains on); anchored: the mean of "
                   "its repeats divided by the anchor ratio of its round, where it has one (rounds timed at "
                   "different host speeds compare); measured: the raw means")
      ->check(CLI::IsMember({"fastest", "anchored", "measured"}))
      ->capture_default_str();
  eval->add_option("--max-depth", args->model.max_depth, "tree depth")->check(at_least(1, 30))->capture_default_str();
  eval->add_option("--eta", args->model.eta, "learning rate")->check(finite_range(1e-4, 1.0))->capture_default_str();
  eval->add_option("--max-rounds", args->model.max_rounds, "boosting rounds at most (50 without a lower loss end it)")
      ->check(at_least(1, 100000))
      ->capture_default_str();
  eval->add_option("--min-child-weight", args->model.min_child_weight, "XGBoost's min_child_weight")
      ->check(finite_range(0, 1e6))
      ->capture_default_str();
  eval->add_option("--max-leaves", args->model.max_leaves,
                   "leaves per tree at most, grown best split first; 0: grow level by level to --max-depth")
      ->check(at_least(0, 1 << 20))
      ->capture_default_str();
  eval->add_option("--max-bin", args->model.max_bin, "histogram bins per feature (XGBoost's max_bin)")
      ->check(at_least(2, 65536))
      ->capture_default_str();
  eval->add_option("--pairs-per-program", args->model.pairs_per_program, "rank loss: partners drawn per program")
      ->check(at_least(1, 100000))
      ->capture_default_str();
  eval->add_flag("--per-task", args->per_task,
                 "also print each task's metrics, with the share of near ties (test pairs timed within 5% of each "
                 "other) and the pairwise accuracy over the other pairs");
  eval->callback([args] { run_eval(*args); });
}

}  // namespace kiln::cli
