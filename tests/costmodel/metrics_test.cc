// Ranking metrics on examples small enough to compute by hand.
#include "costmodel/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::costmodel {
namespace {

TEST(Metrics, PairwiseAccuracyByHand) {
  // Labels order 0 < 1 < 2 < 3; scores get (0,1) wrong and the other 5 pairs right.
  EXPECT_DOUBLE_EQ(pairwise_accuracy({0.2f, 0.1f, 0.5f, 0.9f}, {0.1f, 0.2f, 0.3f, 0.4f}), 5.0 / 6);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({1, 2, 3}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({3, 2, 1}, {1, 2, 3}), 0.0);
  // Equal scores count one half; equal labels are skipped.
  EXPECT_DOUBLE_EQ(pairwise_accuracy({1, 1}, {0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({1, 2, 3}, {1, 1, 2}), 1.0);
  EXPECT_TRUE(std::isnan(pairwise_accuracy({1, 2}, {5, 5})));
}

TEST(Metrics, PairwiseAccuracyBeyondNearTiesByHand) {
  // Labels 1.00, 1.02, 2.0: the pair (0,1) is 2% apart, a near tie at 5%; the scores get
  // it wrong and the two distinct pairs right.
  std::vector<float> scores = {0.5f, 0.4f, 0.9f};
  std::vector<float> labels = {1.0f, 1.02f, 2.0f};
  double near_ties = 0;
  EXPECT_DOUBLE_EQ(pairwise_accuracy_beyond(scores, labels, 0.05, &near_ties), 1.0);
  EXPECT_DOUBLE_EQ(near_ties, 1.0 / 3);
  EXPECT_DOUBLE_EQ(pairwise_accuracy(scores, labels), 2.0 / 3);
  EXPECT_TRUE(std::isnan(pairwise_accuracy_beyond({1, 2}, {1.0f, 1.01f}, 0.05, &near_ties)));
  EXPECT_DOUBLE_EQ(near_ties, 1.0);
}

TEST(Metrics, SpearmanByHand) {
  EXPECT_DOUBLE_EQ(spearman_rho({10, 20, 30, 40}, {1, 2, 3, 4}), 1.0);
  EXPECT_DOUBLE_EQ(spearman_rho({40, 30, 20, 10}, {1, 2, 3, 4}), -1.0);
  // Ranks (1,3,2,4) against (1,2,3,4): 1 - 6*sum(d^2)/(n(n^2-1)) = 1 - 6*2/60 = 0.8.
  EXPECT_NEAR(spearman_rho({1, 3, 2, 4}, {1, 2, 3, 4}), 0.8, 1e-12);
  // Ties share the average rank: scores ranks (1.5,1.5,3) vs (1,2,3): rho = sqrt(3)/2.
  EXPECT_NEAR(spearman_rho({5, 5, 7}, {1, 2, 3}), std::sqrt(3.0) / 2, 1e-12);
  EXPECT_TRUE(std::isnan(spearman_rho({1}, {1})));
  EXPECT_TRUE(std::isnan(spearman_rho({1, 1, 1}, {1, 2, 3})));
}

TEST(Metrics, TopKByHand) {
  std::vector<float> labels = {1.0f, 0.5f, 0.8f, 0.25f};
  std::vector<float> scores = {0.1f, 0.9f, 0.5f, 0.3f};  // model order: 1, 2, 3, 0
  EXPECT_DOUBLE_EQ(top_k_score(scores, labels, 1), 0.5);
  EXPECT_NEAR(top_k_score(scores, labels, 2), 0.8, 1e-6);
  EXPECT_DOUBLE_EQ(top_k_score(scores, labels, 4), 1.0);
  EXPECT_DOUBLE_EQ(top_k_score(scores, labels, 10), 1.0);
  // Tied scores give no credit for luck: the worse program counts as picked first.
  EXPECT_DOUBLE_EQ(top_k_score({1, 1}, {1.0f, 0.5f}, 1), 0.5);
  EXPECT_TRUE(std::isnan(top_k_score({1, 2}, {0, 0}, 1)));
}

TEST(Metrics, AveragedPerTask) {
  // Task a: perfect order. Task b: reversed. Task c: one sample (only top-k defined).
  std::vector<float> scores = {1, 2, 3, 3, 2, 1, 7};
  std::vector<float> labels = {0.2f, 0.5f, 1.0f, 0.2f, 0.5f, 1.0f, 1.0f};
  std::vector<std::string> tasks = {"a", "a", "a", "b", "b", "b", "c"};
  RankingReport r = rank_by_task(scores, labels, tasks);
  EXPECT_EQ(r.tasks, 3u);
  EXPECT_EQ(r.samples, 7u);
  EXPECT_DOUBLE_EQ(r.pairwise_accuracy, 0.5);  // (1 + 0) / 2
  EXPECT_DOUBLE_EQ(r.spearman, 0.0);           // (1 - 1) / 2
  EXPECT_NEAR(r.top1, (1.0 + 0.2 + 1.0) / 3, 1e-6);
  EXPECT_DOUBLE_EQ(r.top5, 1.0);
  ASSERT_EQ(r.per_task.size(), 3u);
  EXPECT_EQ(r.per_task[1].task, "b");
  EXPECT_EQ(r.per_task[1].samples, 3u);
  EXPECT_DOUBLE_EQ(r.per_task[1].pairwise_accuracy, 0.0);
  EXPECT_DOUBLE_EQ(r.per_task[1].distinct_pairwise_accuracy, 0.0);
  EXPECT_DOUBLE_EQ(r.per_task[0].near_tie_share, 0.0);
  EXPECT_TRUE(std::isnan(r.per_task[2].pairwise_accuracy));
}

TEST(Metrics, PooledPairwiseWeighsTasksByTheirPairs) {
  // Task a: 4 programs (6 pairs), perfect. Task b: 2 programs (1 pair), reversed.
  std::vector<float> scores = {1, 2, 3, 4, 2, 1};
  std::vector<float> labels = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 1.0f};
  std::vector<std::string> tasks = {"a", "a", "a", "a", "b", "b"};
  RankingReport r = rank_by_task(scores, labels, tasks);
  EXPECT_DOUBLE_EQ(r.pairwise_accuracy, 0.5);  // (1 + 0) / 2
  EXPECT_DOUBLE_EQ(r.pooled_pairwise_accuracy, 6.0 / 7);
  EXPECT_EQ(r.per_task[0].pairs, 6u);
  EXPECT_EQ(r.per_task[1].pairs, 1u);
}

TEST(Metrics, MismatchedSizesAreRejected) {
  EXPECT_THROW(pairwise_accuracy({1, 2}, {1}), std::invalid_argument);
  EXPECT_THROW(rank_by_task({1}, {1}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::costmodel
