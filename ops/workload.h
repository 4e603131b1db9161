// Workloads and their keys: the canonical, documented JSON form of a task that other
// compilers compute to look tuned schedules up (format specified in docs/workload-key.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/tensor_type.h"
#include "te/te.h"

namespace kiln::ops {

using ir::TensorType;

/// One operator application. Arguments name workload inputs ("in0", "in1", ...) or
/// earlier op results ("op0", "op1", ...).
struct OpCall {
  std::string op;
  nlohmann::json attrs = nlohmann::json::object();
  std::vector<std::string> args;
};

/// A task: typed inputs, a list of operator applications (producers first) and the
/// results that are outputs.
struct Workload {
  static constexpr int kFormatVersion = 1;

  std::vector<TensorType> inputs;
  std::vector<OpCall> ops;
  std::vector<std::string> outputs;

  /// One operator on fresh inputs; the output is the op's result.
  static Workload single(const std::string &op, std::vector<TensorType> inputs,
                         nlohmann::json attrs = nlohmann::json::object());
  /// Parses and validates (unknown op, bad reference, wrong arity, wrong attribute type
  /// throw std::invalid_argument with the reason).
  static Workload from_json(const nlohmann::json &j);

  /// The canonical JSON object: attributes completed with defaults.
  nlohmann::json to_json() const;
  /// Compact serialization of to_json() with sorted keys: the bytes that get hashed.
  std::string canonical_string() const;
  /// Lowercase hex SHA-256 of canonical_string().
  std::string key_hash() const;
  /// A short human summary, e.g. "conv2d+add+relu 1x64x56x56".
  std::string summary() const;

  /// Builds the compute DAG through the operator library.
  te::ComputeDAG build_dag() const;
  /// The workload's unscheduled program: build_dag() lowered, named after its one
  /// operator, or "fused".
  ir::PrimFunc lower() const;
};

/// Parses "1x64x56x56" into {1, 64, 56, 56}; throws std::invalid_argument on bad text.
std::vector<int64_t> parse_shape(const std::string &text);

}  // namespace kiln::ops
