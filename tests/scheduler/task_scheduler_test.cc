// The task scheduler: its allocation rule on synthetic latency curves, and a real
// multi-task job (builds, measurements, SQLite) that resumes without re-measuring.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "costmodel/xgb_model.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "scheduler/task_scheduler.h"
#include "tests/scheduler/test_runner.h"

namespace kiln::scheduler {
namespace {

namespace fs = std::filesystem;

const auto *const kEarlyRunner = &test_runner();

TaskState task(const std::string &summary, int weight, double flops, std::vector<double> curve) {
  TaskState t;
  t.summary = summary;
  t.weight = weight;
  t.flops = flops;
  t.best_curve = std::move(curve);
  t.rounds = static_cast<int>(t.best_curve.size());
  return t;
}

// Replays the scheduler's rule and bookkeeping against curves that follow a fixed law:
// each pick books the next point of the picked task's curve (early stop included).
// Returns how many rounds each task got.
std::vector<int> allocate(std::vector<TaskState> tasks, const std::vector<std::function<double(int)>> &law,
                          int rounds) {
  SchedulerOptions options;
  options.epsilon = 0;
  options.warmup_trials = 0;  // the curves' law alone
  std::vector<int> picks(tasks.size(), 0);
  for (int r = 0; r < rounds; ++r) {
    int i = TaskScheduler::pick_gradient(tasks, options, 0.5);
    if (i < 0) break;
    ++picks[static_cast<size_t>(i)];
    TaskState &t = tasks[static_cast<size_t>(i)];
    TaskScheduler::record_round(t, law[static_cast<size_t>(i)](static_cast<int>(t.best_curve.size())), true, options);
  }
  return picks;
}

TEST(TaskSchedulerAllocation, UnmeasuredTasksComeFirst) {
  std::vector<TaskState> tasks = {task("dense 1x64", 1, 1e6, {1e-3}), task("relu 1x64", 1, 0, {})};
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, {}, 0.5), 1);
  tasks[1].stopped = true;
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, {}, 0.5), 0);
  tasks[0].stopped = true;
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, {}, 0.5), -1);
}

// After its first program, every task gets candidates up to warmup_trials of its own,
// the largest share of the estimate first, whatever the gradient says; a task the
// database had programs for gets none.
TEST(TaskSchedulerAllocation, TasksAreToppedUpToAFullRoundBeforeTheRuleAllocates) {
  SchedulerOptions options;
  options.epsilon = 0;
  options.warmup_trials = 32;
  // Task 0 is heavy and improving fast: the rule alone would pick it.
  std::vector<TaskState> tasks = {task("conv2d 1x8", 2, 1e9, {0.9, 0.6, 0.3}), task("conv2d 1x16", 1, 1e9, {0.1}),
                                  task("dense 1x8", 1, 1e9, {0.05})};
  tasks[0].progress.trials = 96;
  tasks[1].progress.trials = 8;
  tasks[2].progress.trials = 8;
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, options, 0.5), 1);  // 0.1 ms before 0.05 ms
  tasks[1].progress.trials = 32;
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, options, 0.5), 2);
  tasks[2].resumed = true;
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, options, 0.5), 0);
  tasks[2].resumed = false;
  options.warmup_trials = 0;
  EXPECT_EQ(TaskScheduler::pick_gradient(tasks, options, 0.5), 0);
}

TEST(TaskSchedulerAllocation, FlatCurvesGetFewerRoundsAndHeavyTasksMore) {
  // Task 0 improves 10% per round; task 1 (same weight and size) is flat.
  auto improving = [](int n) { return 1e-3 * std::pow(0.9, n); };
  auto flat = [](int) { return 1e-3; };
  std::vector<TaskState> two = {task("conv2d 1x8", 1, 1e6, {1e-3}), task("matmul 8x8", 1, 1e6, {1e-3})};
  std::vector<int> picks = allocate(two, {improving, flat}, 40);
  EXPECT_GT(picks[0], 2 * picks[1]) << picks[0] << " vs " << picks[1];

  // The same curves, but the flat task runs 20 times per inference: it matters more.
  auto slow_gain = [](int n) { return 1e-3 * std::pow(0.97, n); };
  std::vector<TaskState> weighted = {task("conv2d 1x8", 1, 1e6, {1e-3}), task("matmul 8x8", 20, 1e6, {1e-3})};
  picks = allocate(weighted, {slow_gain, slow_gain}, 40);
  EXPECT_GT(picks[1], 2 * picks[0]) << picks[0] << " vs " << picks[1];
}

TEST(TaskSchedulerAllocation, SimilarTasksPullLaggardsUp) {
  // Task 0 has been flat at 10 GFLOP/s for 40 rounds; task 1, just started, improves.
  // Alone, task 1 is the better bet. But when task 1 is a convolution of the same kind
  // at 100 GFLOP/s, task 0 can expect to get there too (the forward estimate from
  // similar tasks), and gets the round.
  SchedulerOptions options;
  options.epsilon = 0;
  options.warmup_trials = 0;
  std::vector<TaskState> unrelated = {task("conv2d 1x8", 1, 1e9, std::vector<double>(40, 0.1)),
                                      task("matmul 8x8", 1, 1e9, {0.012, 0.01})};
  EXPECT_EQ(TaskScheduler::pick_gradient(unrelated, options, 0.5), 1);
  std::vector<TaskState> similar = {task("conv2d 1x8", 1, 1e9, std::vector<double>(40, 0.1)),
                                    task("conv2d 1x16", 1, 1e9, {0.012, 0.01})};
  EXPECT_EQ(TaskScheduler::pick_gradient(similar, options, 0.5), 0);
}

ops::Workload dense(int64_t m, int64_t n, int64_t k) {
  return ops::Workload::single("dense", {{{m, k}, ir::DType::kFloat32}, {{n, k}, ir::DType::kFloat32}});
}

// Rounds of 8 small, quickly timed candidates; the single measurements decide.
SchedulerOptions small_job(int64_t trials) {
  SchedulerOptions options;
  options.trials = trials;
  options.task.batch = 8;
  options.task.evolution.population = 32;
  options.task.evolution.generations = 1;
  options.task.timing.repeat = 2;
  options.task.timing.min_repeat_ms = 1;
  options.task.confirm_top = 0;
  options.last_offers = 0;
  return options;
}

std::vector<TaskScheduler::Task> three_dense_tasks() {
  return {{dense(16, 24, 32), 2}, {dense(8, 16, 16), 1}, {dense(4, 8, 8), 1}};
}

// A fresh folder of the test's own (removed after it), the target and a builder pool.
struct JobFolder {
  explicit JobFolder(const std::string &name) : dir(fresh(name)), pool(2, dir / "work", 60.0) {}
  ~JobFolder() { fs::remove_all(dir); }
  static fs::path fresh(const std::string &name) {
    fs::path d = fs::temp_directory_path() / (name + "_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }
  fs::path dir;
  Target target = Target::parse("llvm -mcpu=native -num-cores=2");
  measure::LocalBuilderPool pool;
};

TEST(TaskSchedulerJob, TunesEveryTaskStoresEachTrialOnceAndResumes) {
  JobFolder job("kiln_task_scheduler_test");
  const Target &target = job.target;
  measure::LocalBuilderPool &pool = job.pool;
  auto db = db::Database::open(job.dir / "tune.db", db::OpenMode::kCreate);
  SchedulerOptions options = small_job(48);
  std::vector<TaskScheduler::Task> tasks = three_dense_tasks();
  {
    costmodel::XGBoostCostModel model;
    TaskScheduler scheduler(tasks, target, options, &db, pool, test_runner(), model);
    SchedulerResult r = scheduler.run();
    EXPECT_EQ(r.progress.trials, 48);
    ASSERT_EQ(r.progress.tasks.size(), 3u);
    double estimate = 0;
    for (const TaskState &t : r.progress.tasks) {
      EXPECT_GT(t.progress.best_seconds, 0) << t.summary << " has no valid program";
      estimate += t.weight * t.progress.best_seconds;
    }
    EXPECT_DOUBLE_EQ(r.progress.estimated_latency, estimate);
    ASSERT_FALSE(r.progress.rounds.empty());
    EXPECT_EQ(r.progress.rounds.back().trials, 48);
    EXPECT_DOUBLE_EQ(r.progress.rounds.back().estimated_latency, r.progress.estimated_latency);
  }
  EXPECT_EQ(db.stats().records, 48);
  // A second job on the same database resumes: new programs only, none measured twice.
  options.trials = 24;
  options.task.seed = 7;
  costmodel::XGBoostCostModel model;
  TaskScheduler again(tasks, target, options, &db, pool, test_runner(), model);
  int rounds_seen = 0;
  SchedulerResult r = again.run([&](const SchedulerProgress &) { ++rounds_seen; },
                                [&] { return rounds_seen >= 2; });  // an interrupt after two rounds
  EXPECT_EQ(rounds_seen, 2);
  EXPECT_EQ(r.progress.trials, 16);
  EXPECT_EQ(db.stats().records, 48 + 16);  // every new trial stored once; none was measured again
}

// The gradient rule's warm-up rounds are small: every task has a program after 3
// candidates each; then each is topped up to a full batch (8) of its own, and only then
// do rounds take the full batch. Round-robin rounds are always full.
TEST(TaskSchedulerJob, WarmUpRoundsAreSmallUnderTheGradientRule) {
  JobFolder job("kiln_task_scheduler_warmup");
  SchedulerOptions options = small_job(17);
  options.warmup_batch = 3;
  options.warmup_trials = 8;
  std::vector<TaskScheduler::Task> tasks = three_dense_tasks();
  auto gradient_db = db::Database::open(job.dir / "gradient.db", db::OpenMode::kCreate);
  costmodel::XGBoostCostModel model;
  SchedulerResult r = TaskScheduler(tasks, job.target, options, &gradient_db, job.pool, test_runner(), model).run();
  std::vector<int64_t> trials_after;
  for (const auto &round : r.progress.rounds) trials_after.push_back(round.trials);
  EXPECT_EQ(trials_after, (std::vector<int64_t>{3, 6, 9, 14, 17}));
  EXPECT_GT(r.progress.rounds[2].estimated_latency, 0) << "a task has no program after the warm-up";

  options.allocation = Allocation::kRoundRobin;
  options.trials = 8;
  auto db2 = db::Database::open(job.dir / "rr.db", db::OpenMode::kCreate);
  costmodel::XGBoostCostModel model2;
  SchedulerResult rr = TaskScheduler(tasks, job.target, options, &db2, job.pool, test_runner(), model2).run();
  ASSERT_EQ(rr.progress.rounds.size(), 1u);
  EXPECT_EQ(rr.progress.rounds[0].trials, 8);
}

// By default the warm-up takes at most half the trials: 3 tasks and 12 trials give warm-up
// rounds of 2 (half of 12 over 3 tasks), no top-up beyond them, and the other half to the
// gradient rule in a full round.
TEST(TaskSchedulerJob, TheDefaultWarmUpLeavesHalfTheTrials) {
  JobFolder job("kiln_task_scheduler_half_warmup");
  SchedulerOptions options = small_job(12);
  options.warmup_batch = -1;
  options.warmup_trials = -1;
  std::vector<TaskScheduler::Task> tasks = three_dense_tasks();
  auto database = db::Database::open(job.dir / "half.db", db::OpenMode::kCreate);
  costmodel::XGBoostCostModel model;
  SchedulerResult r = TaskScheduler(tasks, job.target, options, &database, job.pool, test_runner(), model).run();
  std::vector<int64_t> trials_after;
  for (const auto &round : r.progress.rounds) trials_after.push_back(round.trials);
  EXPECT_EQ(trials_after, (std::vector<int64_t>{2, 4, 6, 12}));
}

// The same dense layer with a ReLU after it: a separate task whose search samples the
// same decisions as the plain one's.
ops::Workload dense_relu(int64_t m, int64_t n, int64_t k) {
  auto f32 = [](std::vector<int64_t> shape) { return nlohmann::json{{"dtype", "float32"}, {"shape", shape}}; };
  return ops::Workload::from_json({{"kiln_workload", 1},
                                   {"inputs", {f32({m, k}), f32({n, k})}},
                                   {"ops",
                                    {{{"op", "dense"}, {"args", {"in0", "in1"}}, {"attrs", nlohmann::json::object()}},
                                     {{"op", "relu"}, {"args", {"op0"}}, {"attrs", nlohmann::json::object()}}}},
                                   {"outputs", {"op1"}}});
}

// The first round's best of the plain dense is offered to the dense + ReLU task, which
// measures it (marked in the record) in its own first round; with sharing off, nothing is.
TEST(TaskSchedulerJob, SiblingTasksShareTheirBestPrograms) {
  JobFolder job("kiln_task_scheduler_share");
  const Target &target = job.target;
  measure::LocalBuilderPool &pool = job.pool;
  SchedulerOptions options = small_job(16);
  options.allocation = Allocation::kRoundRobin;
  std::vector<TaskScheduler::Task> tasks = {{dense(16, 24, 32), 1}, {dense_relu(16, 24, 32), 1}};
  for (int share : {2, 0}) {
    options.task.evolution.max_adopted = share;
    auto db = db::Database::open(job.dir / ("share" + std::to_string(share) + ".db"), db::OpenMode::kCreate);
    costmodel::XGBoostCostModel model;
    TaskScheduler scheduler(tasks, target, options, &db, pool, test_runner(), model);
    SchedulerResult r = scheduler.run();
    ASSERT_EQ(r.tasks.size(), 2u);
    EXPECT_EQ(r.tasks[0].progress.adopted, 0) << "the first task had its round before any other had a best";
    int stored_as_adopted = 0;
    for (const db::Record &rec : db.records_of(tasks[1].workload.key_hash())) stored_as_adopted += rec.metadata.adopted;
    if (share > 0) {
      EXPECT_EQ(r.tasks[1].progress.adopted, 1);
      EXPECT_EQ(stored_as_adopted, 1);
    } else {
      EXPECT_EQ(r.tasks[1].progress.adopted, 0);
      EXPECT_EQ(stored_as_adopted, 0);
    }
  }
}

// The last trials are kept for the offers: with 8 trials over three dense layers of one
// kind, the warm-up's rounds of 2 end at 6 (2 kept); the first task had its round before
// the others had programs, so the next round measures one program they offered it.
TEST(TaskSchedulerJob, TheLastTrialsMeasureWhatOtherTasksFoundLater) {
  JobFolder job("kiln_task_scheduler_last_offers");
  SchedulerOptions options = small_job(8);
  options.last_offers = 1;
  std::vector<TaskScheduler::Task> tasks = three_dense_tasks();
  auto database = db::Database::open(job.dir / "offers.db", db::OpenMode::kCreate);
  costmodel::XGBoostCostModel model;
  struct Seen {
    int64_t trials;
    int pick;
    int64_t adopted;
  };
  std::vector<Seen> seen{{0, -1, 0}};
  SchedulerResult r =
      TaskScheduler(tasks, job.target, options, &database, job.pool, test_runner(), model)
          .run([&](const SchedulerProgress &p) {
            const RoundRecord &round = p.rounds.back();
            seen.push_back({round.trials, round.task, p.tasks[static_cast<size_t>(round.task)].progress.adopted});
          });
  EXPECT_EQ(r.progress.trials, 8);
  auto adopted_before = [&](size_t k) {
    int64_t adopted = 0;
    for (size_t j = 1; j < k; ++j)
      if (seen[j].pick == seen[k].pick) adopted = seen[j].adopted;
    return adopted;
  };
  size_t k = 1;
  while (k < seen.size() && seen[k - 1].trials < 6) EXPECT_LE(seen[k++].trials, 6) << "the rule took a kept trial";
  ASSERT_LT(k, seen.size());
  int offer_rounds = 0;
  for (; k < seen.size() && seen[k].trials == seen[k - 1].trials + 1 && seen[k].adopted == adopted_before(k) + 1; ++k)
    ++offer_rounds;
  EXPECT_GE(offer_rounds, 1) << "no round measured an offered program";
  EXPECT_LE(offer_rounds, 2);
}

// The re-timing at the end skips the tasks of smallest share of the estimate: the two
// small dense layers, run once per inference against the large one's 8 times, together
// are well under half of it; the large one is not.
TEST(TaskSchedulerJob, TasksOfSmallShareAreNotReTimed) {
  JobFolder job("kiln_task_scheduler_unconfirmed");
  SchedulerOptions options = small_job(24);
  options.task.confirm_top = 2;
  options.task.confirm_runs = 1;
  std::vector<TaskScheduler::Task> tasks = {{dense(16, 24, 32), 8}, {dense(8, 16, 16), 1}, {dense(4, 8, 8), 1}};
  for (double unconfirmed : {0.5, 0.0}) {
    options.unconfirmed_share = unconfirmed;
    auto database = db::Database::open(job.dir / ("u" + std::to_string(unconfirmed) + ".db"), db::OpenMode::kCreate);
    costmodel::XGBoostCostModel model;
    SchedulerResult r = TaskScheduler(tasks, job.target, options, &database, job.pool, test_runner(), model).run();
    ASSERT_EQ(r.tasks.size(), 3u);
    EXPECT_GT(r.tasks[0].confirmed, 0);
    for (size_t i : {1, 2}) {
      if (unconfirmed > 0)
        EXPECT_EQ(r.tasks[i].confirmed, 0) << "task " << i;
      else
        EXPECT_GT(r.tasks[i].confirmed, 0) << "task " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::scheduler
