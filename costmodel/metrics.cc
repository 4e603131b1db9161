// Ranking metrics (see metrics.h).

#include "costmodel/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>

namespace kiln::costmodel {

static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

static void check_sizes(const char *metric, size_t scores, size_t labels) {
  if (scores != labels) {
    throw std::invalid_argument(std::string(metric) + ": " + std::to_string(scores) + " scores but " +
                                std::to_string(labels) + " labels");
  }
}

namespace {

/// The pairs with different labels: how many the scores order right (ties ½), how many
/// are counted (at least `min_ratio` apart) and how many are closer than that.
struct PairCounts {
  double right = 0, pairs = 0, close = 0;
  double accuracy() const { return pairs > 0 ? right / pairs : kNaN; }
};

PairCounts count_pairs(const std::vector<float> &scores, const std::vector<float> &labels, double min_ratio) {
  check_sizes("pairwise_accuracy", scores.size(), labels.size());
  PairCounts c;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = i + 1; j < scores.size(); ++j) {
      if (labels[i] == labels[j]) continue;
      const double low = std::min(labels[i], labels[j]), high = std::max(labels[i], labels[j]);
      if (min_ratio > 0 && !(high >= low * (1 + min_ratio))) {
        c.close += 1;
        continue;
      }
      c.pairs += 1;
      if (scores[i] == scores[j]) {
        c.right += 0.5;
      } else if ((scores[i] < scores[j]) == (labels[i] < labels[j])) {
        c.right += 1;
      }
    }
  }
  return c;
}

}  // namespace

double pairwise_accuracy(const std::vector<float> &scores, const std::vector<float> &labels) {
  return count_pairs(scores, labels, 0).accuracy();
}

double pairwise_accuracy_beyond(const std::vector<float> &scores, const std::vector<float> &labels, double min_ratio,
                                double *near_ties) {
  PairCounts c = count_pairs(scores, labels, min_ratio);
  if (near_ties) *near_ties = c.pairs + c.close > 0 ? c.close / (c.pairs + c.close) : kNaN;
  return c.accuracy();
}

/// Ranks 1..n, ties sharing their average rank.
static std::vector<double> ranks(const std::vector<float> &v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    double average = (static_cast<double>(i + j) / 2) + 1;
    for (size_t k = i; k <= j; ++k) r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

double spearman_rho(const std::vector<float> &scores, const std::vector<float> &labels) {
  check_sizes("spearman_rho", scores.size(), labels.size());
  if (scores.size() < 2) return kNaN;
  std::vector<double> a = ranks(scores), b = ranks(labels);
  double n = static_cast<double>(a.size());
  double mean = (n + 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (a[i] - mean) * (b[i] - mean);
    va += (a[i] - mean) * (a[i] - mean);
    vb += (b[i] - mean) * (b[i] - mean);
  }
  if (va == 0 || vb == 0) return kNaN;
  return cov / std::sqrt(va * vb);
}

double top_k_score(const std::vector<float> &scores, const std::vector<float> &labels, size_t k) {
  check_sizes("top_k_score", scores.size(), labels.size());
  if (labels.empty() || k == 0) return kNaN;
  double best = *std::max_element(labels.begin(), labels.end());
  if (!(best > 0)) return kNaN;
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  // Ties in score are broken toward the worse label: a model that cannot tell
  // programs apart gets no credit for a lucky order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (scores[a] != scores[b]) return scores[a] > scores[b];
    return labels[a] < labels[b];
  });
  double picked = 0;
  for (size_t i = 0; i < k && i < order.size(); ++i) picked = std::max<double>(picked, labels[order[i]]);
  return picked / best;
}

RankingReport rank_by_task(const std::vector<float> &scores, const std::vector<float> &labels,
                           const std::vector<std::string> &tasks) {
  check_sizes("rank_by_task", scores.size(), labels.size());
  check_sizes("rank_by_task (tasks)", tasks.size(), labels.size());
  std::map<std::string, std::pair<std::vector<float>, std::vector<float>>> by_task;
  for (size_t i = 0; i < scores.size(); ++i) {
    auto &[s, l] = by_task[tasks[i]];
    s.push_back(scores[i]);
    l.push_back(labels[i]);
  }
  double sums[4] = {0, 0, 0, 0};
  size_t counts[4] = {0, 0, 0, 0};
  auto add = [&](int m, double v) {
    if (std::isnan(v)) return;
    sums[m] += v;
    counts[m] += 1;
  };
  RankingReport report;
  double pooled_right = 0, pooled_pairs = 0;
  for (const auto &[task, data] : by_task) {
    TaskRanking t;
    t.task = task;
    t.samples = data.first.size();
    PairCounts all = count_pairs(data.first, data.second, 0);
    t.pairwise_accuracy = all.accuracy();
    t.pairs = static_cast<size_t>(all.pairs);
    pooled_right += all.right;
    pooled_pairs += all.pairs;
    t.distinct_pairwise_accuracy =
        pairwise_accuracy_beyond(data.first, data.second, kDistinctPairRatio, &t.near_tie_share);
    t.spearman = spearman_rho(data.first, data.second);
    t.top1 = top_k_score(data.first, data.second, 1);
    add(0, t.pairwise_accuracy);
    add(1, t.spearman);
    add(2, t.top1);
    add(3, top_k_score(data.first, data.second, 5));
    report.per_task.push_back(std::move(t));
  }
  auto mean = [&](int m) { return counts[m] > 0 ? sums[m] / static_cast<double>(counts[m]) : kNaN; };
  report.pairwise_accuracy = mean(0);
  report.pooled_pairwise_accuracy = pooled_pairs > 0 ? pooled_right / pooled_pairs : kNaN;
  report.spearman = mean(1);
  report.top1 = mean(2);
  report.top5 = mean(3);
  report.tasks = by_task.size();
  report.samples = scores.size();
  return report;
}

}  // namespace kiln::costmodel
