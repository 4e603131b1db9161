// The model graph Kiln works on after import: nodes are Kiln operators (ops/) with
// complete attributes, edges are typed tensors with static shapes, constants carry their
// data. Every pass of frontend/ reads and writes this form; nothing after import knows
// ONNX.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/host_tensor.h"
#include "ops/workload.h"

namespace kiln::frontend {

/// Index of a value in Graph::values.
using ValueId = int;

/// A tensor: a graph input, a constant (initializer or folded), or a node's result.
struct Value {
  std::string name;  ///< the model's tensor name
  ir::TensorType type;
  std::shared_ptr<const ir::HostTensor> constant;  ///< set for constants only

  bool is_constant() const { return constant != nullptr; }
};

/// One Kiln operator application with a single result.
struct Node {
  std::string op;                                   ///< an operator of ops/
  nlohmann::json attrs = nlohmann::json::object();  ///< complete (defaults merged)
  std::vector<ValueId> inputs;
  ValueId output = -1;
  std::string source;  ///< the model node it came from, for messages
};

/// Nodes are kept in topological order (producers first).
struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;   ///< non-constant graph inputs, in model order
  std::vector<ValueId> outputs;  ///< graph outputs, in model order

  ValueId add_value(Value v);
  /// Index in `nodes` of the node producing `v`; nullopt for inputs and constants.
  std::optional<size_t> producer(ValueId v) const;

  /// One line per node: "%5 = conv2d(%0, %w1, %b1) {...} : 1x64x112x112 float32".
  std::string to_string() const;
  nlohmann::json to_json() const;
};

/// Readable spelling of a shape: "1x64x56x56" ("scalar" for rank 0).
std::string shape_string(const std::vector<int64_t> &shape);

}  // namespace kiln::frontend
