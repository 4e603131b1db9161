// Traces: the unit that is searched, mutated, stored and shipped.
//
// JSON form (version 1):
//   {"kiln_trace": 1,
//    "instructions": [[kind, inputs, attrs, outputs], ...],
//    "decisions": [[instruction_index, decision], ...]}
// inputs: random-variable names or integer literals (split factors); attrs: an object;
// outputs: new random-variable names. The kind of each random variable (block, loop or
// sampled integer) is the one its defining instruction declares in the instruction
// table (instruction_kind.h): a reader learns it from there, never from the name, so
// every trace stored since version 1 reads as it did. Decisions belong to sampling
// instructions (sample_perfect_tile: the factor list; sample_categorical: the chosen
// index; sample_compute_location: the index of the chosen loop, -1 for the root).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::ir {

struct InstructionKind;

/// What a random variable of a trace stands for.
enum class RVKind : uint8_t { kBlock, kLoop, kInt };
const char *rv_kind_name(RVKind kind);

/// A random variable an instruction defines: its kind and its name in the trace.
struct TraceRV {
  RVKind kind = RVKind::kInt;
  std::string name;
};

struct Instruction {
  const InstructionKind *kind = nullptr;
  nlohmann::json inputs = nlohmann::json::array();
  nlohmann::json attrs = nlohmann::json::object();
  std::vector<TraceRV> outputs;
};

struct Trace {
  static constexpr int kFormatVersion = 1;

  std::vector<Instruction> instructions;
  std::map<size_t, nlohmann::json> decisions;

  nlohmann::json to_json() const;
  /// Throws std::invalid_argument naming the problem (bad shape, unknown version or
  /// instruction kind).
  static Trace from_json(const nlohmann::json &j);
  /// A copy with one decision replaced.
  Trace with_decision(size_t instruction, nlohmann::json decision) const;
  /// Indices of the instructions of `kind` that carry a decision.
  std::vector<size_t> decided(const InstructionKind &kind) const;
};

/// One instruction per line, as a reader would write the schedule by hand, e.g.
///   l4, l5 = split(l2, v3, v4)
///   v6 = sample_categorical(candidates=[0,16], probs=[0.5,0.5])  # decision: 1
std::string to_string(const Trace &trace);

}  // namespace kiln::ir
