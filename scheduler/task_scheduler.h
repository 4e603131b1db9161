// The task scheduler: tunes all tasks of a model at once and gives each round to the
// task whose tuning is expected to cut the model's latency most, as Ansor's does.
//
// Objective: the model's estimated latency, sum over tasks of weight x best latency.
// Warm-up: every task gets rounds in turn until each has a measured program; these
// rounds are `warmup_batch` candidates, not a full batch, so that a model of many tasks
// does not spend its budget before the rule has anything to compare. Then each task is
// topped up to `warmup_trials` candidates of its own (Ansor's warm-up gives every task a
// full round), the largest share of the estimated latency first; a task the database
// already had programs for is not. A program from a few random candidates says little
// about what the task can reach: the rule below, whose optimistic term ranks tasks by
// latency, would otherwise leave a small task at it for good (resnet18's 1x1
// downsampling convolutions at half their speed after 2000 trials, bench/RESULTS.md).
// Then, for each task i with weight w_i, best latency g_i after t_i of its rounds,
// FLOPs C_i:
//
//   backward_i = (g_i(t_i) - g_i(t_i - window)) / window              (<= 0: progress)
//   forward_i  = min(-g_i(t_i) / t_i,                                  (optimistic)
//                    beta * C_i / best_similar_throughput - g_i(t_i))  (what similar tasks reach)
//   gradient_i = w_i * (alpha * backward_i + (1 - alpha) * forward_i)
//
// and the next round goes to the task with the most negative gradient (epsilon-greedy:
// a random task with probability `epsilon`). Similar tasks: the same operators (the
// workload summary's ops), other shapes; without one the forward term is the
// optimistic one alone. A task stops when it has not improved for
// `early_stop_rounds` of its rounds, or when its search space is exhausted.
//
// Tasks share programs: each new best of a task is offered to the others
// (TaskTuner::adopt); those whose sketches sample the same way take its decisions and
// measure the program in their next round (at most EvolutionOptions::max_adopted).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/task_tuner.h"

namespace kiln::scheduler {

enum class Allocation { kGradient, kRoundRobin };

struct SchedulerOptions {
  /// Measured candidates over all tasks (records already in the database do not count).
  int64_t trials = 1000;
  /// Wall-clock budget in seconds; 0 = none. Both budgets hold to within one round.
  double time_limit_seconds = 0;
  Allocation allocation = Allocation::kGradient;
  double alpha = 0.2;
  double beta = 2.0;
  int backward_window = 3;
  double epsilon = 0.05;
  /// Rounds of one task without improvement before it stops; 0 = never.
  int early_stop_rounds = 8;
  /// Candidates in a warm-up round of the gradient rule (a task without a measured
  /// program yet); at most the task's batch. Round-robin rounds are always full batches.
  /// -1: 8, or fewer (at least 2) where tasks × 8 would take more than half the trials.
  int warmup_batch = -1;
  /// Candidates every task gets before the gradient rule allocates (after the first
  /// rounds above); -1: one full batch (TuneOptions::batch), or fewer (at least the
  /// warm-up batch) where tasks × batch would take more than half the trials; 0: none.
  /// A job of many tasks (a model's buckets of a dynamic dimension) then still leaves
  /// half its budget to the gradient rule.
  int warmup_trials = -1;
  /// Per task, trials kept for the end of the job (at most a quarter of `trials` in
  /// all; gradient rule with sharing only): each task then measures up to this many of
  /// the programs other tasks offered it (TaskTuner::adopt) since its last round, the
  /// largest share of the estimate first; what is not spent goes back to the rule. 0: none.
  int64_t last_offers = 1;
  /// The confirmation (TuneOptions::confirm_top) is skipped for the tasks of smallest
  /// share of the estimated latency that together hold at most this share of it: which
  /// of their top programs is faster moves the model by less than their noise, and a job
  /// of hundreds of tasks (a dynamic dimension's buckets) spent a third of its time
  /// re-timing them. 0: every task is confirmed.
  double unconfirmed_share = 0.05;
  /// Per task: batch size (the round), search, timing and confirmation options.
  TuneOptions task;
};

struct TaskState {
  std::string summary;  ///< the workload summary, e.g. "conv2d+relu 1x64x56x56"
  double weight = 0;    ///< runs per inference (the expected runs, for a model with dynamic dimensions)
  double flops = 0;
  int rounds = 0;
  Progress progress;
  std::vector<double> best_curve;  ///< best latency after each of its rounds (0 = none yet)
  bool stopped = false;
  bool resumed = false;  ///< the database had a program for it when the job started
};

/// What one round did, for progress displays and reports.
struct RoundRecord {
  int64_t trials = 0;  ///< measured over all tasks after the round
  double elapsed_seconds = 0;
  int task = 0;                  ///< the task that had the round
  double task_best_seconds = 0;  ///< that task's best latency after it (0 = none yet)
  double estimated_latency = 0;  ///< the model's, after it (0 while some task has none)
};

struct SchedulerProgress {
  int64_t trials = 0;
  int64_t round = 0;
  double elapsed_seconds = 0;
  /// Sum of weight x best latency; 0 while some task has no measured program.
  double estimated_latency = 0;
  std::vector<TaskState> tasks;
  /// Every round so far, oldest first.
  std::vector<RoundRecord> rounds;
};

struct SchedulerResult {
  SchedulerProgress progress;
  std::vector<TuneResult> tasks;
};

class TaskScheduler {
 public:
  struct Task {
    ops::Workload workload;
    double weight = 1;
  };
  /// One cost model is shared by all tasks (features are task-independent).
  TaskScheduler(std::vector<Task> tasks, Target target, SchedulerOptions options, db::Database *database,
                measure::Builder &builder, measure::Runner &runner, costmodel::CostModel &model);

  /// Tunes until a budget is spent, every task stopped, or `should_stop` returns true
  /// (checked between rounds: an interrupt ends the job after the running round).
  /// `on_confirm` is told each task before the end-of-run re-timing of its best
  /// programs (TuneOptions::confirm_top), the silent part after the last round.
  SchedulerResult run(const std::function<void(const SchedulerProgress &)> &on_round = {},
                      const std::function<bool()> &should_stop = {},
                      const std::function<void(size_t task, size_t tasks)> &on_confirm = {});

  /// The gradient rule above for the current states (exposed for tests): the index of
  /// the task to tune next, or -1 when every task is stopped.
  static int pick_gradient(const std::vector<TaskState> &tasks, const SchedulerOptions &options, double random01);
  /// Books a finished round of `task`: its best latency so far (0 = none yet) and
  /// whether its search space had anything new; stops it when exhausted or stalled.
  static void record_round(TaskState &task, double best_seconds, bool space_left, const SchedulerOptions &options);
  /// TaskTuner::passed_over_records of every task.
  std::vector<std::string> passed_over_records() const;

 private:
  void share_best(size_t from);

  std::vector<std::unique_ptr<TaskTuner>> tuners_;
  std::vector<TaskState> states_;
  SchedulerOptions options_;
};

}  // namespace kiln::scheduler
