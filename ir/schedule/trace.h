// Traces: the unit that is searched, mutated, stored and shipped.
//
// JSON form (version 1):
//   {"kiln_trace": 1,
//    "instructions": [[kind, inputs, attrs, outputs], ...],
//    "decisions": [[instruction_index, decision], ...]}
// inputs: random-variable names (strings: "b0" block, "l3" loop, "v2" integer) or
// integer literals (split factors); attrs: an object; outputs: new random-variable
// names. Decisions belong to sampling instructions (sample_perfect_tile: the factor
// list; sample_categorical: the chosen index; sample_compute_location: the index of
// the chosen loop, -1 for the root).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::ir {

struct Instruction {
  std::string kind;
  nlohmann::json inputs = nlohmann::json::array();
  nlohmann::json attrs = nlohmann::json::object();
  std::vector<std::string> outputs;
};

struct Trace {
  static constexpr int kFormatVersion = 1;

  std::vector<Instruction> instructions;
  std::map<size_t, nlohmann::json> decisions;

  nlohmann::json to_json() const;
  /// Throws std::invalid_argument naming the problem (bad shape, unknown version).
  static Trace from_json(const nlohmann::json &j);
  /// A copy with one decision replaced.
  Trace with_decision(size_t instruction, nlohmann::json decision) const;
};

}  // namespace kiln::ir
