// The learned cost model: gradient-boosted trees (XGBoost, through its C API) that
// predict a score per store row; a program's score is the sum over its rows
// ("pack-sum", as in Ansor). Training, retraining policy and loss are described in
// costmodel/README.md.

#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "costmodel/cost_model.h"

namespace kiln::costmodel {

/// What the trees are fitted to; see costmodel/README.md.
enum class Loss {
  /// Ansor's: squared error between a program's score and its normalized throughput,
  /// weighted toward fast programs.
  kSquaredError,
  /// Logistic loss on the order of pairs of programs of the same task: only the
  /// order within a task is learned, which is all search uses.
  kPairwiseRank,
};

struct XGBoostOptions {
  Loss loss = Loss::kPairwiseRank;
  // Tree parameters: Ansor's, which TenSet and MetaSchedule kept.
  int max_depth = 10;
  double eta = 0.2;
  double gamma = 0.001;
  double min_child_weight = 0;
  /// Trees grow best split first up to this many leaves (and max_depth); 0 grows
  /// them level by level to max_depth. Finding a node's split scans every bin of
  /// every feature, which is most of a training's time: 64 leaves rank as well as
  /// the up to 1024 of level-by-level growth, in a third of the time
  /// (bench/RESULTS.md).
  int max_leaves = 64;
  /// Histogram bins per feature (XGBoost's max_bin); fewer train faster and, below
  /// 256, ranked a model's records slightly worse.
  int max_bin = 256;
  /// Boosting rounds of a training from scratch, and how many rounds without a
  /// better training loss end it early.
  int max_rounds = 100;
  int early_stopping_rounds = 50;
  /// Rounds added to the current trees when new data arrives between full trainings.
  int incremental_rounds = 10;
  /// Train from scratch again once the data has grown by this fraction since the
  /// last training from scratch (MetaSchedule's adaptive training).
  double retrain_growth = 0.2;
  /// ready() stays false until this many programs have been seen.
  size_t min_samples = 64;
  /// Squared error: the weight of a program is max(label, min_weight): fast programs
  /// dominate (what search needs to rank right), slow ones are still pulled down.
  double min_weight = 0.05;
  /// Pairwise rank: each program is paired with this many others of its task, drawn
  /// at random once per training (all of them in a smaller task).
  size_t pairs_per_program = 16;
  int threads = 0;  ///< XGBoost threads; 0: its default
  uint64_t seed = 43;
  /// Columns of the rows it learns from: feature_names(true).size() for a GPU
  /// target's programs (one model per target kind); 0 for the CPU layout's.
  size_t num_features = 0;
};

class XGBoostCostModel final : public CostModel {
 public:
  explicit XGBoostCostModel(XGBoostOptions options = {});
  ~XGBoostCostModel() override;
  XGBoostCostModel(const XGBoostCostModel &) = delete;
  XGBoostCostModel &operator=(const XGBoostCostModel &) = delete;

  void update(const Measurements &measured) override;
  /// Trains trees on the other tasks' programs and keeps only the trees: they rank
  /// until update() has brought `min_samples` of this task's programs, which then
  /// train from scratch without the foreign data (it had outweighed the task's own
  /// and kept the search in the wrong region for a convolution).
  void warm_start(const Measurements &others) override;
  std::vector<float> predict(const std::vector<ProgramFeatures> &programs) override;
  bool ready() const override;

  /// Writes the trees (XGBoost JSON) with the feature count they expect. The training
  /// data is not saved: a loaded model is pre-trained and keeps boosting on new data.
  void save(const std::filesystem::path &path) const;
  /// Replaces this model by a saved one; throws std::runtime_error when the file is
  /// unreadable or was written for another feature layout.
  void load(const std::filesystem::path &path);

  size_t num_samples() const { return data_.programs.size(); }
  /// Boosting rounds (trees) in the current model.
  int num_rounds() const { return rounds_; }

 private:
  struct Booster;
  /// Appends the programs that have feature rows to the training data; returns how
  /// many. Throws std::invalid_argument on a size mismatch.
  size_t append_trainable(const Measurements &measured, const char *caller);
  void train_from_scratch();
  void boost(int max_rounds, int early_stopping_rounds);

  XGBoostOptions options_;
  struct TrainingData {
    std::vector<ProgramFeatures> programs;  ///< each with at least one row
    std::vector<double> throughputs;        ///< as given; normalized_per_group labels failures 0
    std::vector<uint32_t> task_of;          ///< id (in task_ids) of each program's task
    std::unordered_map<std::string, uint32_t> task_ids;
  };
  TrainingData data_;
  std::unique_ptr<Booster> booster_;
  size_t trained_from_scratch_on_ = 0;
  bool pretrained_ = false;
  bool warm_started_ = false;
  int rounds_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace kiln::costmodel
