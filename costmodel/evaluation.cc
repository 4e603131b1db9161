// Held-out evaluation (see evaluation.h).

#include "costmodel/evaluation.h"

#include <chrono>
#include <random>
#include <set>
#include <stdexcept>

namespace kiln::costmodel {

HoldoutResult evaluate_holdout(const Measurements &data, const HoldoutOptions &options) {
  data.check_sizes("evaluate_holdout");
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
  Measurements train, test;
  for (size_t i = 0; i < data.size(); ++i) {
    bool is_test = options.split == SplitBy::kTask ? test_tasks.count(data.task(i)) > 0 : to_test(rng);
    (is_test ? test : train).append(data, i);
  }
  if (train.size() == 0 || test.size() == 0) {
    throw std::invalid_argument("the split left " + std::to_string(train.size()) + " training and " +
                                std::to_string(test.size()) +
                                " test programs; both need at least one (more records or another "
                                "--test-fraction/--seed)");
  }
  XGBoostOptions model_options = options.model;
  model_options.min_samples = 0;  // evaluate whatever there is; cold start is a search concern
  XGBoostCostModel model(model_options);
  auto train_start = std::chrono::steady_clock::now();
  model.update(train);
  std::chrono::duration<double> train_time = std::chrono::steady_clock::now() - train_start;
  RandomCostModel random(options.seed);

  std::vector<std::string> test_tasks_of(test.size());
  for (size_t i = 0; i < test.size(); ++i) test_tasks_of[i] = test.task(i);
  // Against the test part's own best: every metric is unchanged by scaling a task's labels.
  std::vector<float> test_labels = normalized_throughputs(test.throughputs, test_tasks_of);
  HoldoutResult result;
  result.train_samples = train.size();
  result.test_samples = test.size();
  result.train_seconds = train_time.count();
  result.rounds = model.num_rounds();
  result.model = rank_by_task(model.predict(test.programs), test_labels, test_tasks_of);
  result.random = rank_by_task(random.predict(test.programs), test_labels, test_tasks_of);
  return result;
}

}  // namespace kiln::costmodel
