// How well scores rank programs, per task and averaged over tasks: pairwise
// accuracy, Spearman's rank correlation, and TenSet's top-k score.

#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::costmodel {

/// Over all pairs with different labels, the fraction the scores order the same way;
/// a pair with equal scores counts one half. 0.5 is random order. Returns NaN when
/// no pair has different labels.
double pairwise_accuracy(const std::vector<float> &scores, const std::vector<float> &labels);

/// Labels (throughputs) this far apart or more (the larger over the smaller, minus 1) make
/// a distinct pair.
inline constexpr double kDistinctPairRatio = 0.05;

/// pairwise_accuracy over the pairs whose labels are at least `min_ratio` apart; NaN when
/// there is none. `near_ties`, when given, receives the share of differing pairs closer than that.
double pairwise_accuracy_beyond(const std::vector<float> &scores, const std::vector<float> &labels, double min_ratio,
                                double *near_ties = nullptr);

/// Pearson correlation of the ranks (ties get their average rank). NaN with fewer
/// than two samples or when scores or labels are all equal.
double spearman_rho(const std::vector<float> &scores, const std::vector<float> &labels);

/// TenSet's top-k score: the best label (throughput) among the k best-scored programs
/// divided by the best label overall; 1 means the model's top k contain the fastest.
/// NaN when the best label is not positive.
double top_k_score(const std::vector<float> &scores, const std::vector<float> &labels, size_t k);

/// One task's metrics (NaN where undefined, e.g. pairwise accuracy with one sample).
struct TaskRanking {
  std::string task;
  size_t samples = 0;
  double pairwise_accuracy = 0;
  /// Over the pairs whose labels differ by kDistinctPairRatio or more: on a shared host one
  /// program's timings spread by a few percent, so closer pairs are ordered partly by noise.
  double distinct_pairwise_accuracy = 0;
  double near_tie_share = 0;  ///< share of the pairs closer than that
  size_t pairs = 0;           ///< pairs with different labels
  double spearman = 0;
  double top1 = 0;
};

struct RankingReport {
  double pairwise_accuracy = 0;
  /// Over every task's pairs together: a task weighs by its pairs, so the few pairs of
  /// a task with a handful of test programs do not weigh as much as a large task's.
  double pooled_pairwise_accuracy = 0;
  double spearman = 0;
  double top1 = 0;
  double top5 = 0;
  size_t tasks = 0;  ///< tasks with at least one sample
  size_t samples = 0;
  std::vector<TaskRanking> per_task;  ///< in task name order
};

/// Every metric computed per task (`tasks[i]` names the task of sample i) and
/// averaged over the tasks where it is defined (not NaN).
RankingReport rank_by_task(const std::vector<float> &scores, const std::vector<float> &labels,
                           const std::vector<std::string> &tasks);

}  // namespace kiln::costmodel
