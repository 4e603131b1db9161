// The instruction table: one entry per schedule primitive, defined next to the
// primitive in schedule.cc. An entry says what the instruction is called in traces,
// what kind of random variable it defines, and how to apply it to a schedule from a
// recorded instruction, which is all that replaying, reading and printing a trace need.
// A new primitive is a method of Schedule, its entry beside it (declared in
// `instructions` below), and one line in the table's list in schedule.cc.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/schedule/trace.h"

namespace kiln::ir {

class Schedule;
struct BlockRV;
struct LoopRV;
struct ExprRV;

/// A recorded instruction as its entry sees it during replay: inputs already renamed
/// to the replaying schedule's random variables and checked for their kind.
class InstructionArgs {
 public:
  struct Input {
    std::optional<TraceRV> rv;  // renamed; absent for an integer literal
    int64_t literal = 0;
  };

  InstructionArgs(const Instruction &instruction, size_t index, std::vector<Input> inputs,
                  std::optional<nlohmann::json> decision);

  size_t num_inputs() const { return inputs_.size(); }
  RVKind kind_of(size_t i) const;
  bool is_literal(size_t i) const;
  int64_t literal(size_t i) const;
  BlockRV block(size_t i) const;
  LoopRV loop(size_t i) const;
  ExprRV expr(size_t i) const;
  /// Every input, each a loop.
  std::vector<LoopRV> loops() const;
  const nlohmann::json &attr(const std::string &key) const;
  const nlohmann::json &attrs() const { return instruction_.attrs; }
  const std::optional<nlohmann::json> &decision() const { return decision_; }

 private:
  const TraceRV &rv(size_t i, RVKind kind) const;

  const Instruction &instruction_;
  size_t index_;
  std::vector<Input> inputs_;
  std::optional<nlohmann::json> decision_;
};

struct InstructionKind {
  /// Applies the instruction; returns the names of the random variables it defined.
  using ApplyFn = std::vector<std::string> (*)(Schedule &, const InstructionArgs &);

  std::string_view name;
  /// The kind of every random variable the instruction defines.
  RVKind output_kind;
  ApplyFn apply;
  /// Sampling instructions carry a decision; mutators change it.
  bool samples = false;
};

/// nullptr for a name no entry has.
const InstructionKind *find_instruction_kind(std::string_view name);
/// Every entry, in the order schedule.cc lists them.
const std::vector<const InstructionKind *> &instruction_kinds();

/// The entries the search refers to by name (defined in schedule.cc).
namespace instructions {
extern const InstructionKind kGetBlock, kGetLoops, kSplit, kFuse, kReorder, kParallel, kVectorize, kUnroll, kBind,
    kAnnotate, kComputeAt, kReverseComputeAt, kComputeInline, kReverseComputeInline, kCacheRead, kCacheWrite, kRfactor,
    kSamplePerfectTile, kSampleTile, kSampleCategorical, kSampleComputeLocation;
}  // namespace instructions

}  // namespace kiln::ir
