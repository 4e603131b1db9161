// The design space: schedule rules that turn a program into sketches (traces whose
// sampling instructions are still to be decided), postprocessors that finish a sampled
// sketch into a concrete program, and mutators that change one decision of a sketch.
// Each is a small class behind one interface; the default lists per target are plain
// functions (see the .cc files for what each rule does and why).
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/schedule/schedule.h"
#include "ir/target.h"

namespace kiln::search {

using Rng = std::mt19937_64;

/// Applied to one block of a schedule; returns the schedules it fans out to (the input
/// unchanged, as its only element, when the rule does not apply).
class ScheduleRule {
 public:
  virtual ~ScheduleRule() = default;
  virtual std::string name() const = 0;
  virtual std::vector<ir::Schedule> apply(const ir::Schedule &sch, const std::string &block) const = 0;
};

/// Finishes a sampled sketch (e.g. turns annotations into loop kinds); false rejects it.
class Postprocessor {
 public:
  virtual ~Postprocessor() = default;
  virtual std::string name() const = 0;
  virtual bool apply(ir::Schedule &sch) const = 0;
};

/// Changes one decision of a sketch trace; nullopt when it has nothing to change.
class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual std::string name() const = 0;
  virtual std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const = 0;
};

struct WeightedMutator {
  std::unique_ptr<Mutator> mutator;
  double probability;
};

std::vector<std::unique_ptr<ScheduleRule>> default_rules(const Target &target);
std::vector<std::unique_ptr<Postprocessor>> default_postprocessors(const Target &target);
/// The rules of a schedule that needs no tuning (what a model compiles with before its
/// tasks are tuned): element-wise producers inlined, loops annotated to run parallel
/// outside and vectorized inside; no tiling.
std::vector<std::unique_ptr<ScheduleRule>> untuned_rules(const Target &target);
std::vector<WeightedMutator> default_mutators(const Target &target);

/// Applies `rules` to every block in reverse topological order (consumers first) and
/// returns the sketches' traces, with decisions removed.
std::vector<ir::Trace> generate_sketches(const ir::PrimFunc &func,
                                         const std::vector<std::unique_ptr<ScheduleRule>> &rules, uint64_t seed);

/// A copy of `trace` without decisions: replaying it samples every decision afresh.
ir::Trace strip_decisions(const ir::Trace &trace);

/// A concrete candidate: the sketch with its decisions (what mutators change), the full
/// trace after postprocessing (what is stored and replayed), and the program.
struct Candidate {
  ir::Trace sketch;
  ir::Trace trace;
  ir::PrimFunc func;
};

/// Replays `sketch` (sampling missing decisions from `seed`) and postprocesses; nullopt
/// when replay fails or a postprocessor rejects the result.
std::optional<Candidate> realize(const ir::PrimFunc &func, const ir::Trace &sketch,
                                 const std::vector<std::unique_ptr<Postprocessor>> &postprocessors, uint64_t seed);

}  // namespace kiln::search
