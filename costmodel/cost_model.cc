// Measurements, the random baseline model and label normalization.

#include "costmodel/cost_model.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace kiln::costmodel {

std::vector<float> RandomCostModel::predict(const std::vector<ProgramFeatures> &programs) {
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> scores;
  scores.reserve(programs.size());
  for (const ProgramFeatures &p : programs) {
    float u = uniform(rng_);  // drawn for every program so the sequence does not depend on failures
    scores.push_back(p.ok() ? u : -std::numeric_limits<float>::infinity());
  }
  return scores;
}

const std::string &Measurements::task(size_t i) const {
  static const std::string kOnlyTask;
  return tasks.empty() ? kOnlyTask : tasks[i];
}

void Measurements::append(const Measurements &from, size_t i) {
  programs.push_back(from.programs[i]);
  throughputs.push_back(from.throughputs[i]);
  if (!from.tasks.empty()) tasks.push_back(from.tasks[i]);
}

void Measurements::check_sizes(const char *caller) const {
  if (throughputs.size() != programs.size() || (!tasks.empty() && tasks.size() != programs.size())) {
    throw std::invalid_argument(std::string(caller) + ": " + std::to_string(programs.size()) + " programs but " +
                                std::to_string(throughputs.size()) + " throughputs and " +
                                std::to_string(tasks.size()) + " task names");
  }
}

static bool positive_finite(double x) { return std::isfinite(x) && x > 0; }

std::vector<double> throughputs_of(const std::vector<double> &latencies) {
  std::vector<double> out;
  out.reserve(latencies.size());
  for (double l : latencies) out.push_back(positive_finite(l) ? 1.0 / l : 0.0);
  return out;
}

std::vector<float> normalized_per_group(const std::vector<double> &throughputs, const std::vector<uint32_t> &group) {
  if (throughputs.size() != group.size()) {
    throw std::invalid_argument("normalized_per_group: " + std::to_string(throughputs.size()) + " throughputs but " +
                                std::to_string(group.size()) + " group ids");
  }
  std::vector<double> best;
  for (size_t i = 0; i < throughputs.size(); ++i) {
    if (group[i] >= best.size()) best.resize(group[i] + 1, 0.0);
    if (positive_finite(throughputs[i])) best[group[i]] = std::max(best[group[i]], throughputs[i]);
  }
  std::vector<float> labels(throughputs.size(), 0.0f);
  for (size_t i = 0; i < throughputs.size(); ++i) {
    if (positive_finite(throughputs[i])) labels[i] = static_cast<float>(throughputs[i] / best[group[i]]);
  }
  return labels;
}

std::vector<float> normalized_throughputs(const std::vector<double> &throughputs,
                                          const std::vector<std::string> &tasks) {
  if (!tasks.empty() && throughputs.size() != tasks.size()) {
    throw std::invalid_argument("normalized_throughputs: " + std::to_string(throughputs.size()) + " throughputs but " +
                                std::to_string(tasks.size()) + " task names");
  }
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<uint32_t> group(throughputs.size(), 0);
  for (size_t i = 0; i < tasks.size(); ++i) group[i] = ids.emplace(tasks[i], ids.size()).first->second;
  return normalized_per_group(throughputs, group);
}

}  // namespace kiln::costmodel
