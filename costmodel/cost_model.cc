/// \file
/// The random baseline model and label normalization.

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

static bool valid_latency(double l) { return std::isfinite(l) && l > 0; }

std::vector<float> normalized_throughputs(const std::vector<double> &latencies, const std::vector<std::string> &tasks) {
  if (latencies.size() != tasks.size()) {
    throw std::invalid_argument("normalized_throughputs: " + std::to_string(latencies.size()) + " latencies but " +
                                std::to_string(tasks.size()) + " task names");
  }
  std::unordered_map<std::string, double> best;
  for (size_t i = 0; i < latencies.size(); ++i) {
    if (!valid_latency(latencies[i])) continue;
    auto [it, inserted] = best.emplace(tasks[i], latencies[i]);
    if (!inserted) it->second = std::min(it->second, latencies[i]);
  }
  std::vector<float> labels(latencies.size(), 0.0f);
  for (size_t i = 0; i < latencies.size(); ++i) {
    if (valid_latency(latencies[i])) labels[i] = static_cast<float>(best.at(tasks[i]) / latencies[i]);
  }
  return labels;
}

}  // namespace kiln::costmodel
