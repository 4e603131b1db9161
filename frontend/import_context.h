// What an op importer sees: the ONNX node being imported, its inputs as graph values,
// its attributes, and the means to emit Kiln operators (constant-folded when every
// input is a constant) and to bind the node's outputs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "frontend/graph.h"

namespace kiln::frontend {

class ImportContext {
 public:
  explicit ImportContext(int opset) : opset_(opset) {}

  int opset() const { return opset_; }
  Graph &graph() { return graph_; }

  /// Binds a model tensor name to a value (inputs, initializers, node outputs).
  void bind(const std::string &name, ValueId v) { by_name_[name] = v; }
  std::optional<ValueId> lookup(const std::string &name) const;
  ValueId add_constant(ir::HostTensor data, const std::string &name);

  // ---- the node being imported ----------------------------------------------------
  void begin(const onnx::NodeProto &node) {
    node_ = &node;
    first_value_of_node_ = graph_.values.size();
  }
  const onnx::NodeProto &node() const { return *node_; }
  [[noreturn]] void fail(const std::string &message) const;

  int num_inputs() const { return node_->input_size(); }
  bool has_input(int i) const { return i < node_->input_size() && !node_->input(i).empty(); }
  ValueId input(int i) const;
  const Value &value(ValueId v) const { return graph_.values[static_cast<size_t>(v)]; }
  const ir::TensorType &type(ValueId v) const { return value(v).type; }
  /// The constant data of input `i` (`what` names it in the error otherwise).
  const ir::HostTensor &constant_input(int i, const std::string &what) const;
  /// The single element of a constant input (Clip's bounds, Pad's value).
  double scalar_input(int i, const std::string &what) const;
  /// An integer constant input as a list (shapes, axes, pads).
  std::vector<int64_t> int_list_input(int i, const std::string &what) const;

  bool has_attr(const std::string &name) const;
  int64_t attr_int(const std::string &name, int64_t fallback) const;
  float attr_float(const std::string &name, float fallback) const;
  std::string attr_string(const std::string &name, const std::string &fallback) const;
  std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> fallback) const;
  const onnx::AttributeProto *attr(const std::string &name) const;

  /// Adds `op` over `inputs` (or evaluates it when all are constants) and returns its
  /// result; shape and attribute errors come back as this node's errors.
  ValueId emit(const std::string &op, const std::vector<ValueId> &inputs,
               nlohmann::json attrs = nlohmann::json::object());
  /// Fails unless `shape` is a shape a constant may have here: no negative extent and
  /// at most kMaxConstantElements elements (a model may ask for a 10^12-element
  /// ConstantOfShape in a few bytes).
  void check_constant_shape(const std::vector<int64_t> &shape, const std::string &what) const;
  static constexpr int64_t kMaxConstantElements = int64_t{1} << 28;
  /// A constant computed by the importer itself.
  ValueId constant(ir::HostTensor data);
  /// Binds output `i` of the node; a node output nobody reads may stay unbound. The
  /// value takes the output's exact name when this node made it (a composed importer
  /// names every value it emits after the output, so the last one had a suffix): the
  /// model's output names are what a user of the compiled model sees.
  void set_output(int i, ValueId v);
  /// Fails if output `i` exists and is read by the model (an output Kiln cannot make).
  void require_unused_output(int i, const std::string &what) const;
  void note_use(const std::string &name) { used_.insert(name); }

 private:
  std::string fresh_name(const std::string &base);

  int opset_;
  Graph graph_;
  std::map<std::string, ValueId> by_name_;
  std::set<std::string> names_, used_;
  const onnx::NodeProto *node_ = nullptr;
  size_t first_value_of_node_ = 0;
};

/// Imports one ONNX operator type.
using OpImporter = std::function<void(ImportContext &)>;
/// Every importer by ONNX op type (default domain).
const std::map<std::string, OpImporter> &op_importers();

}  // namespace kiln::frontend
