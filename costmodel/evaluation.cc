/// \file
/// Held-out evaluation (see evaluation.h).

#include "costmodel/evaluation.h"

#include <random>
#include <set>
#include <stdexcept>

namespace kiln::costmodel {

static void append(const LabeledPrograms &from, size_t i, LabeledPrograms *to) {
  to->features.push_back(from.features[i]);
  to->labels.push_back(from.labels[i]);
  to->tasks.push_back(from.tasks[i]);
}

HoldoutResult evaluate_holdout(const LabeledPrograms &data, const HoldoutOptions &options) {
  if (data.features.size() != data.labels.size() || data.tasks.size() != data.labels.size()) {
    throw std::invalid_argument("evaluate_holdout: features, labels and tasks differ in length");
  }
  std::mt19937_64 rng(options.seed);
  std::bernoulli_distribution to_test(options.test_fraction);
  std::set<std::string> test_tasks;
  if (options.split == SplitBy::kTask) {
    // Decide per task in sorted order so the split does not depend on record order.
    std::set<std::string> tasks(data.tasks.begin(), data.tasks.end());
    for (const std::string &t : tasks) {
      if (to_test(rng)) test_tasks.insert(t);
    }
  }
  LabeledPrograms train, test;
  for (size_t i = 0; i < data.labels.size(); ++i) {
    bool is_test = options.split == SplitBy::kTask ? test_tasks.count(data.tasks[i]) > 0 : to_test(rng);
    append(data, i, is_test ? &test : &train);
  }
  if (train.labels.empty() || test.labels.empty()) {
    throw std::invalid_argument("the split left " + std::to_string(train.labels.size()) + " training and " +
                                std::to_string(test.labels.size()) +
                                " test programs; both need at least one (more records or another "
                                "--test-fraction/--seed)");
  }
  XGBoostOptions model_options = options.model;
  model_options.min_samples = 0;  // evaluate whatever there is; cold start is a search concern
  XGBoostCostModel model(model_options);
  model.update(train.features, train.labels);
  RandomCostModel random(options.seed);

  HoldoutResult result;
  result.train_samples = train.labels.size();
  result.test_samples = test.labels.size();
  result.model = rank_by_task(model.predict(test.features), test.labels, test.tasks);
  result.random = rank_by_task(random.predict(test.features), test.labels, test.tasks);
  return result;
}

}  // namespace kiln::costmodel
