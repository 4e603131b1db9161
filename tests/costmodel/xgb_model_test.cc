// The XGBoost pack-sum model on real programs' features with a synthetic, known
// ranking: it must learn it, round-trip through a file, and stay cold until it has
// enough samples.
#include "costmodel/xgb_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <unistd.h>

#include "costmodel/evaluation.h"
#include "costmodel/metrics.h"
#include "tests/costmodel/gemm_schedules.h"

namespace kiln::costmodel {
namespace {

using testing::tiled_gemm;

struct Dataset {
  std::vector<ProgramFeatures> features;
  std::vector<float> labels;
  std::vector<std::string> tasks;
};

// Three GEMM shapes (tasks) x tile sizes x vectorization. The synthetic throughput
// rewards vectorization and wider j tiles with diminishing returns, and taller i
// tiles a little: a non-linear function of the schedule the model never sees.
const Dataset &gemm_dataset() {
  static const Dataset data = [] {
    Dataset d;
    std::vector<ir::PrimFunc> programs;
    std::vector<double> latencies;
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
            latencies.push_back(1.0 / speed);
            d.tasks.push_back(task);
          }
        }
      }
    }
    d.features = extract_features_batch(programs, 2);
    d.labels = normalized_throughputs(latencies, d.tasks);
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
    to.features.push_back(d.features[i]);
    to.labels.push_back(d.labels[i]);
    to.tasks.push_back(d.tasks[i]);
  }
  return s;
}

TEST(XGBoostCostModel, LearnsASyntheticRankingOfRealPrograms) {
  Split s = split(gemm_dataset(), 7);
  ASSERT_GE(s.train.labels.size(), 64u);
  ASSERT_GE(s.test.labels.size(), 20u);
  XGBoostCostModel model;
  model.update(s.train.features, s.train.labels);
  ASSERT_TRUE(model.ready());
  RankingReport r = rank_by_task(model.predict(s.test.features), s.test.labels, s.test.tasks);
  std::printf("held out: %zu programs, pairwise %.3f, spearman %.3f, top-1 %.3f\n", r.samples, r.pairwise_accuracy,
              r.spearman, r.top1);
  EXPECT_GE(r.pairwise_accuracy, 0.9);
  EXPECT_GE(r.top1, 0.8);
}

TEST(XGBoostCostModel, ColdUntilEnoughSamples) {
  const Dataset &d = gemm_dataset();
  XGBoostOptions options;
  options.min_samples = 64;
  XGBoostCostModel model(options);
  std::vector<ProgramFeatures> first(d.features.begin(), d.features.begin() + 40);
  std::vector<float> first_labels(d.labels.begin(), d.labels.begin() + 40);
  model.update(first, first_labels);
  EXPECT_FALSE(model.ready());
  EXPECT_EQ(model.num_rounds(), 0);
  std::vector<float> scores = model.predict(first);
  for (float v : scores) EXPECT_TRUE(v >= 0 && v < 1) << "random scores while cold";

  std::vector<ProgramFeatures> more(d.features.begin() + 40, d.features.end());
  std::vector<float> more_labels(d.labels.begin() + 40, d.labels.end());
  model.update(more, more_labels);
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
  model.warm_start(std::vector<ProgramFeatures>(d.features.begin(), d.features.begin() + 60),
                   std::vector<float>(d.labels.begin(), d.labels.begin() + 60));
  EXPECT_TRUE(model.ready());
  EXPECT_EQ(model.num_samples(), 0u);
  int warm_rounds = model.num_rounds();
  EXPECT_GT(warm_rounds, 0);
  auto own = [&](size_t from, size_t to) {
    model.update(std::vector<ProgramFeatures>(d.features.begin() + from, d.features.begin() + to),
                 std::vector<float>(d.labels.begin() + from, d.labels.begin() + to));
  };
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
  auto slice = [&](size_t from, size_t to) {
    model.update(std::vector<ProgramFeatures>(d.features.begin() + from, d.features.begin() + to),
                 std::vector<float>(d.labels.begin() + from, d.labels.begin() + to));
  };
  slice(0, 100);
  int after_full = model.num_rounds();
  EXPECT_GT(after_full, 0);
  slice(100, 110);  // +10%: keep boosting the same trees
  EXPECT_EQ(model.num_rounds(), after_full + 5);
  slice(110, 144);  // +44% since the full training: train from scratch
  EXPECT_LE(model.num_rounds(), 40);
}

TEST(XGBoostCostModel, FailedProgramsScoreLowest) {
  const Dataset &d = gemm_dataset();
  XGBoostCostModel model;
  model.update(d.features, d.labels);
  ProgramFeatures failed;
  failed.error = "lowering failed";
  std::vector<float> scores = model.predict({d.features[0], failed});
  EXPECT_TRUE(std::isfinite(scores[0]));
  EXPECT_EQ(scores[1], -std::numeric_limits<float>::infinity());
}

TEST(XGBoostCostModel, SaveLoadRoundTripGivesIdenticalPredictions) {
  const Dataset &d = gemm_dataset();
  XGBoostCostModel model;
  model.update(d.features, d.labels);
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln_costmodel_" + std::to_string(getpid()) + ".json");
  model.save(path);
  XGBoostCostModel loaded;
  loaded.load(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(loaded.ready());
  EXPECT_EQ(loaded.num_rounds(), model.num_rounds());
  EXPECT_EQ(loaded.predict(d.features), model.predict(d.features));
}

TEST(XGBoostCostModel, LoadRejectsMissingFile) {
  XGBoostCostModel model;
  EXPECT_THROW(model.load("/nonexistent/kiln-model.json"), std::runtime_error);
}

TEST(Evaluation, HoldoutBeatsRandomOnBothSplits) {
  const Dataset &d = gemm_dataset();
  LabeledPrograms data{d.features, d.labels, d.tasks};
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
  EXPECT_EQ(a.predict(d.features), b.predict(d.features));
}

TEST(Labels, NormalizedThroughputPerTask) {
  std::vector<float> l = normalized_throughputs({2.0, 1.0, 4.0, 3.0, -1.0}, {"a", "a", "a", "b", "b"});
  EXPECT_EQ(l, (std::vector<float>{0.5f, 1.0f, 0.25f, 1.0f, 0.0f}));
}

}  // namespace
}  // namespace kiln::costmodel
