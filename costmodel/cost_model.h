/// \file
/// The interface search uses to rank candidate programs before measuring them, and
/// the labels it is trained with.

#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "costmodel/features.h"

namespace kiln::costmodel {

/// Scores programs so that a higher score means a faster program. Only the order of
/// scores within one task matters. Implementations are not thread-safe.
class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Adds measured programs: `labels[i]` is the normalized throughput of
  /// `programs[i]` (see normalized_throughputs). Programs whose features failed are
  /// ignored.
  virtual void update(const std::vector<ProgramFeatures> &programs, const std::vector<float> &labels) = 0;
  /// Programs of other tasks, to rank with until this task has data of its own. A
  /// model that can tell the two apart guides with them only until update() has given
  /// it enough of this task's programs, then forgets them; by default they are
  /// ordinary training data.
  virtual void warm_start(const std::vector<ProgramFeatures> &programs, const std::vector<float> &labels) {
    update(programs, labels);
  }
  /// One score per program. A program whose features failed gets -infinity.
  virtual std::vector<float> predict(const std::vector<ProgramFeatures> &programs) = 0;
  /// False while the model knows too little to beat random order; predict() then
  /// returns random scores, and search should sample instead of trusting them.
  virtual bool ready() const = 0;
};

/// Uniform random scores, for ablations (how much does the learned model help?).
class RandomCostModel final : public CostModel {
 public:
  explicit RandomCostModel(uint64_t seed) : rng_(seed) {}
  void update(const std::vector<ProgramFeatures> &, const std::vector<float> &) override {}
  std::vector<float> predict(const std::vector<ProgramFeatures> &programs) override;
  bool ready() const override { return true; }

 private:
  std::mt19937_64 rng_;
};

/// Per task, best latency / latency: 1 for the fastest program of its task, in (0, 1]
/// for the others, 0 for a failed measurement (latency <= 0 or not finite).
/// `tasks[i]` names the task of `latencies[i]` (e.g. the workload hash).
std::vector<float> normalized_throughputs(const std::vector<double> &latencies, const std::vector<std::string> &tasks);

}  // namespace kiln::costmodel
