// Held-out evaluation of a cost model on measured programs: split, train on one
// part, rank the other, report the ranking metrics per task.

#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/features.h"
#include "costmodel/metrics.h"
#include "costmodel/xgb_model.h"

namespace kiln::costmodel {

enum class SplitBy {
  /// Each program goes to the test part with probability test_fraction: the model
  /// has seen other programs of the same tasks, as during tuning.
  kRecord,
  /// Whole tasks go to the test part: transfer to tasks the model has never seen.
  kTask,
};

struct HoldoutOptions {
  double test_fraction = 0.2;
  uint64_t seed = 0;
  SplitBy split = SplitBy::kRecord;
  XGBoostOptions model;
};

struct HoldoutResult {
  size_t train_samples = 0;
  size_t test_samples = 0;
  double train_seconds = 0;  ///< wall time of the training
  int rounds = 0;            ///< boosting rounds it made
  RankingReport model;       ///< the trained XGBoost model on the test part
  RankingReport random;      ///< random scores on the test part, for reference
};

/// Throws std::invalid_argument when either part would be empty.
HoldoutResult evaluate_holdout(const Measurements &data, const HoldoutOptions &options);

}  // namespace kiln::costmodel
