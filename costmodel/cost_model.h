// The interface search uses to rank candidate programs before measuring them, and
// the labels it is trained with.

#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "costmodel/features.h"

namespace kiln::costmodel {

/// Measured programs a model learns from.
struct Measurements {
  std::vector<ProgramFeatures> programs;
  /// Throughput of `programs[i]`: 1 / latency or any quantity proportional to it
  /// within a task (only ratios within a task mean anything); 0 for a failed
  /// measurement.
  std::vector<double> throughputs;
  /// Task of `programs[i]` (e.g. the workload hash); left empty when all programs
  /// belong to one task.
  std::vector<std::string> tasks;

  size_t size() const { return programs.size(); }
  /// The task of program i ("" when `tasks` is empty).
  const std::string &task(size_t i) const;
  /// Appends program i of `from`.
  void append(const Measurements &from, size_t i);
  /// Throws std::invalid_argument naming `caller` unless throughputs (and tasks,
  /// when given) match the programs in number.
  void check_sizes(const char *caller) const;
};

/// Scores programs so that a higher score means a faster program. Only the order of
/// scores within one task matters. Implementations are not thread-safe.
class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Adds measured programs. Labels are derived at every training, per task, from
  /// the best throughput seen so far, so a faster program found later relabels the
  /// earlier ones. Programs whose features failed are ignored.
  virtual void update(const Measurements &measured) = 0;
  /// Programs of other tasks, to rank with until this task has data of its own. A
  /// model that can tell the two apart guides with them only until update() has given
  /// it enough of this task's programs, then forgets them; by default they are
  /// ordinary training data.
  virtual void warm_start(const Measurements &others) { update(others); }
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
  void update(const Measurements &) override {}
  std::vector<float> predict(const std::vector<ProgramFeatures> &programs) override;
  bool ready() const override { return true; }

 private:
  std::mt19937_64 rng_;
};

/// 1 / latency, or 0 for a failed measurement (latency <= 0 or not finite).
std::vector<double> throughputs_of(const std::vector<double> &latencies);

/// Per group, throughput / the group's best throughput: 1 for the fastest program of
/// its group, in (0, 1] for the others, 0 for failures (throughput <= 0 or not
/// finite). `group[i]` (a small integer id) is the group of `throughputs[i]`.
std::vector<float> normalized_per_group(const std::vector<double> &throughputs, const std::vector<uint32_t> &group);

/// Per task, throughput / the task's best throughput: 1 for the fastest program of
/// its task, in (0, 1] for the others, 0 for failures (throughput <= 0 or not
/// finite). `tasks[i]` is the task of `throughputs[i]`; empty: all one task.
std::vector<float> normalized_throughputs(const std::vector<double> &throughputs,
                                          const std::vector<std::string> &tasks);

}  // namespace kiln::costmodel
