// The XGBoost pack-sum model on real programs' features with a synthetic, known
// ranking: it must learn it, round-trip through a file, and stay cold until it has
// enough samples.
#include "costmodel/xgb_model.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <utility>

#include "costmodel/evaluation.h"
#include "costmodel/metrics.h"
#include "tests/costmodel/gemm_schedules.h"

namespace kiln::costmodel {
namespace {

using testing::tiled_gemm;

struct Dataset {
  Measurements measured;
  std::vector<float> labels;  ///< normalized per task, to score rankings with
};

Measurements slice(const Measurements &m, size_t from, size_t to) {
  Measurements out;
  for (size_t i = from; i < to; ++i) out.append(m, i);
  return out;
}

// Three GEMM shapes (tasks) x tile sizes x vectorization. The synthetic throughput
// rewards vectorization and wider j tiles with diminishing returns, and taller i
// tiles a little: a non-linear function of the schedule the model never sees.
const Dataset &gemm_dataset() {
  static const Dataset data = [] {
    Dataset d;
    std::vector<ir::PrimFunc> programs;
    struct Shape {
      int64_t m, n, k;
    };
    for (Shape s : {Shape{64, 64, 64}, Shape{32, 64, 128}, Shape{128, 32, 64}}) {
      std::string task = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
      for (int64_t tj : {1, 2, 4, 8, 16, 32}) {
        for (int64_t ti : {1, 2, 4, 8}) {
          for (bool vec : {false, true}) {
            programs.push_back(tiled_gemm(s.m, s.n, s.k, tj, vec, false, ti));
            double speed = (vec ? 3.0 * std::min<double>(static_cast<double>(tj), 8) / 8 + 1 : 1) *
                           std::log2(2.0 * static_cast<double>(tj)) * (1 + 0.3 * std::log2(static_cast<double>(ti)));
            d.measured.throughputs.push_back(speed);
            d.measured.tasks.push_back(task);
          }
        }
      }
    }
    d.measured.programs = extract_features_batch(programs, 2);
    d.labels = normalized_throughputs(d.measured.throughputs, d.measured.tasks);
    return d;
  }();
  return data;
}

struct Split {
  Dataset train, test;
};

Split split(const Dataset &d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Split s;
  for (size_t i = 0; i < d.labels.size(); ++i) {
    Dataset &to = rng() % 4 == 0 ? s.test : s.train;
    to.measured.append(d.measured, i);
    to.labels.push_back(d.labels[i]);
  }
  return s;
}

class BothLosses : public ::testing::TestWithParam<Loss> {};

TEST_P(BothLosses, LearnsASyntheticRankingOfRealPrograms) {
  Split s = split(gemm_dataset(), 7);
  ASSERT_GE(s.train.labels.size(), 64u);
  ASSERT_GE(s.test.labels.size(), 20u);
  XGBoostOptions options;
  options.loss = GetParam();
  XGBoostCostModel model(options);
  model.update(s.train.measured);
  ASSERT_TRUE(model.ready());
  RankingReport r = rank_by_task(model.predict(s.test.measured.programs), s.test.labels, s.test.measured.tasks);
  std::printf("held out: %zu programs, pairwise %.3f, spearman %.3f, top-1 %.3f\n", r.samples, r.pairwise_accuracy,
              r.spearman, r.top1);
  EXPECT_GE(r.pairwise_accuracy, 0.9);
  EXPECT_GE(r.top1, 0.8);
}

INSTANTIATE_TEST_SUITE_P(XGBoostCostModel, BothLosses, ::testing::Values(Loss::kSquaredError, Loss::kPairwiseRank),
                         [](const ::testing::TestParamInfo<Loss> &info) {
                           return info.param == Loss::kSquaredError ? std::string("SquaredError")
                                                                    : std::string("PairwiseRank");
                         });

// Trees grown level by level (max_leaves 0, Ansor's) and with few bins learn the
// same ranking as the default best-first, leaf-limited trees.
TEST(XGBoostCostModel, LevelByLevelTreesAndFewBinsLearnToo) {
  Split s = split(gemm_dataset(), 7);
  for (auto [leaves, bins] : {std::pair{0, 256}, std::pair{64, 16}}) {
    XGBoostOptions options;
    options.max_leaves = leaves;
    options.max_bin = bins;
    XGBoostCostModel model(options);
    model.update(s.train.measured);
    RankingReport r = rank_by_task(model.predict(s.test.measured.programs), s.test.labels, s.test.measured.tasks);
    EXPECT_GE(r.pairwise_accuracy, 0.9) << leaves << " leaves, " << bins << " bins";
  }
}

// Tasks larger than pairs_per_program + 1 pair each program with random partners.
TEST(XGBoostCostModel, RankLossLearnsFromRandomPartners) {
  Split s = split(gemm_dataset(), 7);
  XGBoostOptions options;
  options.loss = Loss::kPairwiseRank;
  options.pairs_per_program = 4;  // tasks hold ~36 training programs: partners are drawn
  XGBoostCostModel model(options);
  model.update(s.train.measured);
  RankingReport r = rank_by_task(model.predict(s.test.measured.programs), s.test.labels, s.test.measured.tasks);
  EXPECT_GE(r.pairwise_accuracy, 0.85);

  options.pairs_per_program = 0;
  EXPECT_THROW(XGBoostCostModel{options}, std::invalid_argument);
}

// Labels are relative to the best program seen so far: when a batch ten times faster
// arrives, the programs that were the best before must be fitted as slow ones.
TEST(XGBoostCostModel, FasterProgramsRelabelEarlierOnes) {
  const Dataset &d = gemm_dataset();
  XGBoostOptions options;
  options.loss = Loss::kSquaredError;
  options.min_samples = 0;
  options.retrain_growth = 1e9;  // boost the same trees: the relabelling must reach them too
  options.incremental_rounds = 300;
  XGBoostCostModel model(options);
  size_t half = d.labels.size() / 2;
  Measurements early = slice(d.measured, 0, half), late = slice(d.measured, half, d.labels.size());
  early.tasks.clear();
  late.tasks.clear();
  for (double &t : late.throughputs) t *= 10;
  model.update(early);
  std::vector<float> before = model.predict(early.programs);
  model.update(late);
  std::vector<float> after = model.predict(early.programs);
  float best_before = *std::max_element(before.begin(), before.end());
  float best_after = *std::max_element(after.begin(), after.end());
  EXPECT_GT(best_before, 0.7f);
  EXPECT_LT(best_after, 0.5f);  // their true share is about 0.1; unrelabelled they stay near 1
}

TEST(XGBoostCostModel, ColdUntilEnoughSamples) {
  const Dataset &d = gemm_dataset();
  XGBoostOptions options;
  options.min_samples = 64;
  XGBoostCostModel model(options);
  Measurements first = slice(d.measured, 0, 40);
  model.update(first);
  EXPECT_FALSE(model.ready());
  EXPECT_EQ(model.num_rounds(), 0);
  std::vector<float> scores = model.predict(first.programs);
  for (float v : scores) EXPECT_TRUE(v >= 0 && v < 1) << "random scores while cold";

  model.update(slice(d.measured, 40, d.labels.size()));
  EXPECT_TRUE(model.ready());
  EXPECT_GT(model.num_rounds(), 0);
}

// Warm-start data ranks while the task has too little of its own, and is not part of
// the training set: once enough own programs arrive they train alone.
TEST(XGBoostCostModel, WarmStartTreesRankUntilOwnDataTakesOver) {
  const Dataset &d = gemm_dataset();
  XGBoostOptions options;
  options.min_samples = 64;
  XGBoostCostModel model(options);
  ASSERT_GE(d.labels.size(), 124u);
  model.warm_start(slice(d.measured, 0, 60));
  EXPECT_TRUE(model.ready());
  EXPECT_EQ(model.num_samples(), 0u);
  int warm_rounds = model.num_rounds();
  EXPECT_GT(warm_rounds, 0);
  auto own = [&](size_t from, size_t to) { model.update(slice(d.measured, from, to)); };
  own(60, 90);  // 30 own programs: still the warm-start trees
  EXPECT_EQ(model.num_samples(), 30u);
  EXPECT_EQ(model.num_rounds(), warm_rounds);
  EXPECT_TRUE(model.ready());
  own(90, 124);  // 64 own programs: trained on them alone
  EXPECT_EQ(model.num_samples(), 64u);
  EXPECT_TRUE(model.ready());
}

TEST(XGBoostCostModel, IncrementalUpdatesAddRoundsUntilDataGrowsEnough) {
  const Dataset &d = gemm_dataset();
  XGBoostOptions options;
  options.min_samples = 64;
  options.max_rounds = 40;
  options.incremental_rounds = 5;
  XGBoostCostModel model(options);
  auto add = [&](size_t from, size_t to) { model.update(slice(d.measured, from, to)); };
  add(0, 100);
  int after_full = model.num_rounds();
  EXPECT_GT(after_full, 0);
  add(100, 110);  // +10%: keep boosting the same trees
  EXPECT_EQ(model.num_rounds(), after_full + 5);
  add(110, 144);  // +44% since the full training: train from scratch
  EXPECT_LE(model.num_rounds(), 40);
}

TEST(XGBoostCostModel, FailedProgramsScoreLowest) {
  const Dataset &d = gemm_dataset();
  XGBoostCostModel model;
  model.update(d.measured);
  ProgramFeatures failed;
  failed.error = "lowering failed";
  std::vector<float> scores = model.predict({d.measured.programs[0], failed});
  EXPECT_TRUE(std::isfinite(scores[0]));
  EXPECT_EQ(scores[1], -std::numeric_limits<float>::infinity());
}

TEST(XGBoostCostModel, SaveLoadRoundTripGivesIdenticalPredictions) {
  const Dataset &d = gemm_dataset();
  XGBoostCostModel model;
  model.update(d.measured);
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln_costmodel_" + std::to_string(getpid()) + ".json");
  model.save(path);
  XGBoostCostModel loaded;
  loaded.load(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(loaded.ready());
  EXPECT_EQ(loaded.num_rounds(), model.num_rounds());
  EXPECT_EQ(loaded.predict(d.measured.programs), model.predict(d.measured.programs));
}

TEST(XGBoostCostModel, LoadRejectsMissingFile) {
  XGBoostCostModel model;
  EXPECT_THROW(model.load("/nonexistent/kiln-model.json"), std::runtime_error);
}

TEST(Evaluation, HoldoutBeatsRandomOnBothSplits) {
  const Dataset &d = gemm_dataset();
  const Measurements &data = d.measured;
  HoldoutOptions options;
  options.seed = 3;
  HoldoutResult by_record = evaluate_holdout(data, options);
  EXPECT_EQ(by_record.train_samples + by_record.test_samples, d.labels.size());
  EXPECT_EQ(by_record.model.tasks, 3u);
  EXPECT_GT(by_record.model.pairwise_accuracy, by_record.random.pairwise_accuracy);

  options.split = SplitBy::kTask;
  options.test_fraction = 0.4;
  HoldoutResult by_task = evaluate_holdout(data, options);
  EXPECT_GE(by_task.model.tasks, 1u);
  EXPECT_LT(by_task.model.tasks, 3u);

  options.test_fraction = 0;
  EXPECT_THROW(evaluate_holdout(data, options), std::invalid_argument);
}

TEST(RandomCostModel, IsReadyAndDeterministicPerSeed) {
  const Dataset &d = gemm_dataset();
  RandomCostModel a(1), b(1);
  EXPECT_TRUE(a.ready());
  EXPECT_EQ(a.predict(d.measured.programs), b.predict(d.measured.programs));
}

TEST(Labels, NormalizedThroughputPerTask) {
  std::vector<float> l = normalized_throughputs(throughputs_of({2.0, 1.0, 4.0, 3.0, -1.0}), {"a", "a", "a", "b", "b"});
  EXPECT_EQ(l, (std::vector<float>{0.5f, 1.0f, 0.25f, 1.0f, 0.0f}));
  EXPECT_EQ(normalized_throughputs({2.0, 0.0, 4.0}, {}), (std::vector<float>{0.5f, 0.0f, 1.0f}));
}

}  // namespace
}  // namespace kiln::costmodel
