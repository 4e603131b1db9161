#include "scheduler/task_scheduler.h"
#include "support/clock.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <random>

namespace kiln::scheduler {
namespace {

// The operators of a task ("conv2d+relu"): tasks with the same ones are similar.
std::string ops_of(const std::string &summary) { return summary.substr(0, summary.find(' ')); }

double best_of(const TaskState &t) { return t.best_curve.empty() ? 0 : t.best_curve.back(); }
// A task's part of the estimated latency: runs per inference × its best latency.
double share_of(const TaskState &t) { return t.weight * best_of(t); }

// Half the trials, spread over the tasks: what the defaults of the warm-up may take.
int64_t half_share(const SchedulerOptions &options, size_t tasks) {
  return options.trials / (2 * static_cast<int64_t>(std::max<size_t>(tasks, 1)));
}

int warmup_batch(const SchedulerOptions &options, size_t tasks) {
  if (options.warmup_batch >= 0) return options.warmup_batch;
  return static_cast<int>(std::clamp<int64_t>(half_share(options, tasks), 2, 8));
}

int64_t warmup_trials(const SchedulerOptions &options, size_t tasks) {
  if (options.warmup_trials >= 0) return options.warmup_trials;
  return std::max<int64_t>(warmup_batch(options, tasks),
                           std::min<int64_t>(options.task.batch, half_share(options, tasks)));
}

bool needs_top_up(const TaskState &t, const SchedulerOptions &options, size_t tasks) {
  return !t.resumed && t.progress.trials < warmup_trials(options, tasks);
}

// Every task but those of smallest share of the estimated latency that together hold
// at most `unconfirmed_share` of it (all of them when a task has no program yet).
std::vector<bool> tasks_to_confirm(const std::vector<TaskState> &states, double unconfirmed_share) {
  std::vector<bool> confirm(states.size(), true);
  double total = 0;
  for (const TaskState &t : states) total += share_of(t);
  if (unconfirmed_share <= 0 || total <= 0) return confirm;
  std::vector<size_t> order(states.size());
  std::iota(order.begin(), order.end(), 0);
  auto share = [&](size_t i) { return share_of(states[i]); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return share(a) < share(b); });
  double skipped = 0;
  for (size_t i : order) {
    if (best_of(states[i]) <= 0) continue;  // nothing to re-time
    if (skipped + share(i) > unconfirmed_share * total) break;
    skipped += share(i);
    confirm[i] = false;
  }
  return confirm;
}

}  // namespace

// A task's new best goes to every other task whose search samples the same way (the
// same convolution with and without the residual add are separate tasks): a good
// program of one is a good start for the other, and replay on the other checks it.
void TaskScheduler::share_best(size_t from) {
  const ir::Trace &sketch = tuners_[from]->best_sketch();
  if (sketch.instructions.empty()) return;
  for (size_t i = 0; i < tuners_.size(); ++i)
    if (i != from) tuners_[i]->adopt(sketch);
}

TaskScheduler::TaskScheduler(std::vector<Task> tasks, Target target, SchedulerOptions options, db::Database *database,
                             measure::Builder &builder, measure::Runner &runner, costmodel::CostModel &model)
    : options_(std::move(options)) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    TuneOptions task_options = options_.task;
    task_options.seed = options_.task.seed + i;
    tuners_.push_back(
        std::make_unique<TaskTuner>(tasks[i].workload, target, task_options, database, builder, runner, model));
    TaskState s;
    s.summary = tasks[i].workload.summary();
    s.weight = tasks[i].weight;
    s.flops = tuners_.back()->flops();
    states_.push_back(s);
  }
}

std::vector<std::string> TaskScheduler::passed_over_records() const {
  std::vector<std::string> all;
  for (const auto &tuner : tuners_)
    all.insert(all.end(), tuner->passed_over_records().begin(), tuner->passed_over_records().end());
  return all;
}

int TaskScheduler::pick_gradient(const std::vector<TaskState> &tasks, const SchedulerOptions &options,
                                 double random01) {
  std::vector<int> open;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!tasks[i].stopped) open.push_back(static_cast<int>(i));
  if (open.empty()) return -1;
  for (int i : open)
    if (best_of(tasks[static_cast<size_t>(i)]) <= 0) return i;  // warm-up: a program for everyone first
  auto share = [&](int i) { return share_of(tasks[static_cast<size_t>(i)]); };
  int top_up = -1;
  for (int i : open)
    if (needs_top_up(tasks[static_cast<size_t>(i)], options, tasks.size()) && (top_up < 0 || share(i) > share(top_up)))
      top_up = i;
  if (top_up >= 0) return top_up;
  if (random01 < options.epsilon) {
    auto k = static_cast<size_t>(random01 / options.epsilon * static_cast<double>(open.size()));
    return open[std::min(k, open.size() - 1)];
  }
  int pick = -1;
  double most_negative = std::numeric_limits<double>::infinity();
  for (int i : open) {
    const TaskState &t = tasks[static_cast<size_t>(i)];
    double g = best_of(t);
    auto rounds = static_cast<int>(t.best_curve.size());
    int window = std::min(options.backward_window, rounds - 1);
    double backward = window > 0 ? (g - t.best_curve[static_cast<size_t>(rounds - 1 - window)]) / window : 0;
    double forward = -g / std::max(1, rounds);
    double best_similar = 0;
    for (const TaskState &other : tasks)
      if (&other != &t && ops_of(other.summary) == ops_of(t.summary) && best_of(other) > 0 && other.flops > 0)
        best_similar = std::max(best_similar, other.flops / best_of(other));
    if (best_similar > 0 && t.flops > 0) forward = std::min(forward, options.beta * t.flops / best_similar - g);
    double gradient = t.weight * (options.alpha * backward + (1 - options.alpha) * forward);
    if (gradient < most_negative) {
      most_negative = gradient;
      pick = i;
    }
  }
  return pick;
}

void TaskScheduler::record_round(TaskState &task, double best_seconds, bool space_left,
                                 const SchedulerOptions &options) {
  ++task.rounds;
  if (!space_left) task.stopped = true;
  if (best_seconds > 0) task.best_curve.push_back(best_seconds);
  auto k = static_cast<size_t>(options.early_stop_rounds);
  bool stalled =
      k > 0 && task.best_curve.size() > k && task.best_curve[task.best_curve.size() - 1 - k] <= best_of(task);
  bool never_measured = k > 0 && task.best_curve.empty() && task.rounds >= options.early_stop_rounds;
  if (stalled || never_measured) task.stopped = true;
}

SchedulerResult TaskScheduler::run(const std::function<void(const SchedulerProgress &)> &on_round,
                                   const std::function<bool()> &should_stop,
                                   const std::function<void(size_t task, size_t tasks)> &on_confirm) {
  double start = support::now_seconds();
  SchedulerResult result;
  SchedulerProgress &p = result.progress;
  for (size_t i = 0; i < tuners_.size(); ++i) {
    tuners_[i]->prepare();
    states_[i].progress = tuners_[i]->progress();
    if (states_[i].progress.best_seconds > 0) states_[i].best_curve.push_back(states_[i].progress.best_seconds);
    states_[i].resumed = states_[i].progress.best_seconds > 0;
  }
  for (size_t i = 0; i < tuners_.size(); ++i) share_best(i);
  std::mt19937_64 rng(options_.task.seed);
  std::uniform_real_distribution<double> uniform(0, 1);
  size_t next_in_turn = 0;
  auto estimate = [&] {
    double total = 0;
    for (const TaskState &t : states_) {
      if (best_of(t) <= 0) return 0.0;
      total += share_of(t);
    }
    return total;
  };
  auto play = [&](int pick, int n) {
    TaskState &state = states_[static_cast<size_t>(pick)];
    TaskTuner &tuner = *tuners_[static_cast<size_t>(pick)];
    int64_t before = tuner.progress().trials;
    double best_before = tuner.progress().best_seconds;
    bool more = tuner.run_round(n);
    state.progress = tuner.progress();
    if (state.progress.best_seconds > 0 && state.progress.best_seconds != best_before)
      share_best(static_cast<size_t>(pick));
    p.trials += state.progress.trials - before;
    ++p.round;
    record_round(state, state.progress.best_seconds, more, options_);
    p.estimated_latency = estimate();
    p.elapsed_seconds = support::now_seconds() - start;
    p.rounds.push_back({p.trials, p.elapsed_seconds, pick, state.progress.best_seconds, p.estimated_latency});
    p.tasks = states_;
    if (on_round) on_round(p);
  };
  auto out_of_time = [&] {
    return (options_.time_limit_seconds > 0 && support::now_seconds() - start >= options_.time_limit_seconds) ||
           (should_stop && should_stop());
  };
  // The last offers: trials kept for the end, when every task has had its rounds.
  const int64_t reserve =
      options_.allocation == Allocation::kGradient && options_.task.evolution.max_adopted > 0
          ? std::min<int64_t>(static_cast<int64_t>(tuners_.size()) * options_.last_offers, options_.trials / 4)
          : 0;
  bool offered = reserve == 0;
  while (p.trials < options_.trials) {
    if (out_of_time()) break;
    if (!offered && p.trials >= options_.trials - reserve) {
      // Each task measures the newest programs other tasks offered it since its last
      // round, largest share of the estimate first: a task given only its warm-up (one
      // of a dynamic dimension's buckets) has never seen what its siblings found later.
      offered = true;
      std::vector<size_t> order(tuners_.size());
      std::iota(order.begin(), order.end(), 0);
      auto share = [&](size_t i) { return share_of(states_[i]); };
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return share(a) > share(b); });
      for (size_t i : order) {
        if (p.trials >= options_.trials || out_of_time()) break;
        auto n = static_cast<int>(std::min<int64_t>(
            {static_cast<int64_t>(tuners_[i]->pending_adopted()), options_.last_offers, options_.trials - p.trials}));
        if (n > 0) play(static_cast<int>(i), n);
      }
      continue;
    }
    int pick = -1;
    if (options_.allocation == Allocation::kGradient) {
      pick = pick_gradient(states_, options_, uniform(rng));
    } else {
      for (size_t k = 0; k < states_.size() && pick < 0; ++k) {
        size_t i = (next_in_turn + k) % states_.size();
        if (!states_[i].stopped) pick = static_cast<int>(i);
      }
      next_in_turn = static_cast<size_t>(pick + 1);
    }
    if (pick < 0) break;  // every task stopped
    const TaskState &state = states_[static_cast<size_t>(pick)];
    int batch = options_.task.batch;
    if (options_.allocation == Allocation::kGradient && best_of(state) <= 0)
      batch = std::max(1, std::min(batch, warmup_batch(options_, states_.size())));
    else if (options_.allocation == Allocation::kGradient && needs_top_up(state, options_, states_.size()))
      batch =
          static_cast<int>(std::min<int64_t>(batch, warmup_trials(options_, states_.size()) - state.progress.trials));
    const int64_t limit = offered ? options_.trials : options_.trials - reserve;
    play(pick, static_cast<int>(std::min<int64_t>(batch, limit - p.trials)));
  }
  std::vector<bool> confirm = tasks_to_confirm(states_, options_.unconfirmed_share);
  for (size_t i = 0; i < tuners_.size(); ++i) {
    if (on_confirm && confirm[i]) on_confirm(i, tuners_.size());
    result.tasks.push_back(tuners_[i]->finish(confirm[i]));
    states_[i].progress = result.tasks.back().progress;
    if (states_[i].progress.best_seconds > 0) states_[i].best_curve.push_back(states_[i].progress.best_seconds);
  }
  p.estimated_latency = estimate();
  p.elapsed_seconds = support::now_seconds() - start;
  p.tasks = states_;
  return result;
}

}  // namespace kiln::scheduler
