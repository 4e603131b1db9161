// The design space: schedule rules that turn a program into sketches (traces whose
// sampling instructions are still to be decided), postprocessors that finish a sampled
// sketch into a concrete program, and mutators that change one decision of a sketch.
// Each is a small class behind one interface. A SearchSpace holds the three lists; the
// default lists per target come from public factory functions, so a new rule is a new
// class plus one line in a default list (or a push_back by whoever builds a space).
#pragma once

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/schedule/schedule.h"
#include "target/target.h"

namespace kiln::search {

using Rng = std::mt19937_64;

/// Applied to one block of a schedule; returns the schedules it fans out to (the input
/// unchanged, as its only element, when the rule does not apply). The rule owns the
/// schedule it is given (generate_sketches moves each state in): one that applies
/// changes it in place and one that does not hands it back (only(std::move(sch))), so
/// that no state is copied per block. A schedule's trace grows with the program, and a
/// copy per block made sketches of a long fused chain quadratic in its length.
class ScheduleRule {
 public:
  virtual ~ScheduleRule() = default;
  virtual std::string name() const = 0;
  virtual std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const = 0;
};

/// A rule's result of one schedule, moved in (a braced list would copy it).
inline std::vector<ir::Schedule> only(ir::Schedule sch) {
  std::vector<ir::Schedule> out;
  out.push_back(std::move(sch));
  return out;
}

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
  std::shared_ptr<const Mutator> mutator;
  /// Relative weight: the chance of being picked is this over the sum of all weights.
  double probability;
};

// Lists share their (stateless) members, so spaces and tuner options copy cheaply.
using RuleList = std::vector<std::shared_ptr<const ScheduleRule>>;
using PostprocessorList = std::vector<std::shared_ptr<const Postprocessor>>;
using MutatorList = std::vector<WeightedMutator>;

/// What a search explores: the rules that make its sketches (applied in order to every
/// block), the postprocessors that finish and filter each sample (in order), and the
/// mutators that change decisions during evolution.
struct SearchSpace {
  RuleList rules;
  PostprocessorList postprocessors;
  MutatorList mutators;
};

// The defaults for a target: CPU lists for llvm targets (x86-64, AArch64), GPU lists for
// cuda ones; what each rule, postprocessor and mutator does is said in its file
// (rules/*.cc, postprocessors.cc, mutators.cc).
RuleList default_rules(const Target &target);
PostprocessorList default_postprocessors(const Target &target);
MutatorList default_mutators(const Target &target);
/// The rules of a schedule that needs no tuning (what a model compiles with before its
/// tasks are tuned): element-wise producers inlined, loops annotated to run parallel
/// outside and vectorized inside; no tiling.
RuleList untuned_rules(const Target &target);

/// The program a subgraph runs before it is tuned (search/untuned.cc): blocks that
/// MultiLevelTiling applies to get its first sketch that realizes with decisions chosen
/// by rule (a register tile filling the accumulator registers, the reduction whole
/// inside it, parallel outer tiles), others the first sketch of untuned_rules with
/// decisions from a fixed seed; the same program compiles to the same code. `func`
/// itself when nothing realizes.
ir::PrimFunc untuned_schedule(const ir::PrimFunc &func, const Target &target);
/// For a cuda target: every block's spatial loops fused over blocks of up to 256
/// threads, reductions serial in each thread (correct, not fast; the reference GPU
/// candidates are checked against).
/// The trace untuned_schedule applies (after postprocessing), nullopt when none.
std::optional<ir::Trace> untuned_trace(const ir::PrimFunc &func, const Target &target);

/// The default space of a target: the three default lists.
SearchSpace default_search_space(const Target &target);

/// Applies `rules` to every block in reverse topological order (consumers first) and
/// returns the sketches' traces, with decisions removed.
std::vector<ir::Trace> generate_sketches(const ir::PrimFunc &func, const RuleList &rules, uint64_t seed);

/// A copy of `trace` without decisions: replaying it samples every decision afresh.
ir::Trace strip_decisions(const ir::Trace &trace);

/// A concrete candidate: the sketch with its decisions (what mutators change), the full
/// trace after postprocessing (what is stored and replayed), and the program.
struct Candidate {
  ir::Trace sketch;
  ir::Trace trace;
  ir::PrimFunc func;
  /// Carried over from another task's program (EvolutionarySearch::adopt), and with
  /// tilings fitted to this task's loops (search/transfer.h).
  bool adopted = false, fitted = false;
};

/// Replays `sketch` (sampling missing decisions from `seed`) and postprocesses; nullopt
/// when replay fails or a postprocessor rejects the result.
std::optional<Candidate> realize(const ir::PrimFunc &func, const ir::Trace &sketch,
                                 const PostprocessorList &postprocessors, uint64_t seed);

/// untuned_schedule's program as a candidate of the default search space (CPU targets;
/// nullopt for cuda and when no sketch of the default rules realizes): what a task's
/// first batch measures, so that tuning never ends slower than the untuned default.
std::optional<Candidate> untuned_candidate(const ir::PrimFunc &func, const Target &target);

/// A sketch and the seed that samples its missing decisions.
struct SeededSketch {
  ir::Trace sketch;
  uint64_t seed = 0;
};

/// realize() of each job on up to `threads` threads (0: one per core); the results are
/// in the jobs' order and do not depend on the thread count.
std::vector<std::optional<Candidate>> realize_all(const ir::PrimFunc &func, const std::vector<SeededSketch> &jobs,
                                                  const PostprocessorList &postprocessors, int threads);

}  // namespace kiln::search
