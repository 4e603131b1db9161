#include "frontend/import_context.h"

#include "frontend/onnx_import.h"
#include "frontend/onnx_tensor.h"
#include "ir/interpreter.h"
#include "ops/registry.h"

namespace kiln::frontend {

std::optional<ValueId> ImportContext::lookup(const std::string &name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::string ImportContext::fresh_name(const std::string &base) {
  std::string name = base.empty() ? "t" : base;
  for (int k = 1; !names_.insert(name).second; ++k) name = base + "_" + std::to_string(k);
  return name;
}

ValueId ImportContext::add_constant(ir::HostTensor data, const std::string &name) {
  Value v;
  v.name = fresh_name(name);
  v.type = {data.shape(), data.dtype()};
  v.constant = std::make_shared<const ir::HostTensor>(std::move(data));
  return graph_.add_value(std::move(v));
}

void ImportContext::fail(const std::string &message) const {
  std::string name = node_->name().empty() ? (node_->output_size() ? node_->output(0) : "?") : node_->name();
  throw ImportError("node '" + name + "' (" + node_->op_type() + "): " + message);
}

ValueId ImportContext::input(int i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  std::optional<ValueId> v = lookup(node_->input(i));
  if (!v) fail("input '" + node_->input(i) + "' is not defined before this node (a cycle or a dangling input)");
  return *v;
}

const ir::HostTensor &ImportContext::constant_input(int i, const std::string &what) const {
  const Value &v = value(input(i));
  if (!v.is_constant())
    fail(what + " (input " + std::to_string(i) + ", '" + node_->input(i) +
         "') must be a constant: Kiln compiles static graphs, where it is computed from initializers and shapes");
  return *v.constant;
}

double ImportContext::scalar_input(int i, const std::string &what) const {
  const ir::HostTensor &t = constant_input(i, what);
  if (t.size() != 1) fail(what + " must hold one element, not " + std::to_string(t.size()));
  return t.get(0);
}

std::vector<int64_t> ImportContext::int_list_input(int i, const std::string &what) const {
  const ir::HostTensor &t = constant_input(i, what);
  if (!ir::is_int(t.dtype())) fail(what + " must be an integer tensor");
  std::vector<int64_t> out(static_cast<size_t>(t.size()));
  if (t.dtype() == ir::DType::kInt64) {
    const auto *p = static_cast<const int64_t *>(t.data());
    out.assign(p, p + t.size());
  } else {
    for (int64_t k = 0; k < t.size(); ++k) out[static_cast<size_t>(k)] = static_cast<int64_t>(t.get(k));
  }
  return out;
}

const onnx::AttributeProto *ImportContext::attr(const std::string &name) const {
  for (const onnx::AttributeProto &a : node_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool ImportContext::has_attr(const std::string &name) const { return attr(name) != nullptr; }

int64_t ImportContext::attr_int(const std::string &name, int64_t fallback) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT) fail("attribute '" + name + "' must be an integer");
  return a->i();
}

float ImportContext::attr_float(const std::string &name, float fallback) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT) fail("attribute '" + name + "' must be a float");
  return a->f();
}

std::string ImportContext::attr_string(const std::string &name, const std::string &fallback) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) fail("attribute '" + name + "' must be a string");
  return a->s();
}

std::vector<int64_t> ImportContext::attr_ints(const std::string &name, std::vector<int64_t> fallback) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INTS) fail("attribute '" + name + "' must be a list of integers");
  return {a->ints().begin(), a->ints().end()};
}

void ImportContext::check_constant_shape(const std::vector<int64_t> &shape, const std::string &what) const {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(what + " has a negative extent (" + shape_string(shape) + ")");
    if (d != 0 && elements > kMaxConstantElements / d)
      fail(what + " (" + shape_string(shape) + ") would have more than " + std::to_string(kMaxConstantElements) +
           " elements, the most a constant computed at import may have");
    elements *= d;
  }
  if (elements > kMaxConstantElements)
    fail(what + " (" + shape_string(shape) + ") would have more than " + std::to_string(kMaxConstantElements) +
         " elements, the most a constant computed at import may have");
}

ValueId ImportContext::constant(ir::HostTensor data) {
  return add_constant(std::move(data), node_->output_size() ? node_->output(0) : "const");
}

ValueId ImportContext::emit(const std::string &op, const std::vector<ValueId> &inputs, nlohmann::json attrs) {
  const ops::OpDef *def = ops::find_op(op);
  if (!def) throw std::logic_error("importer emits unknown operator " + op);
  ops::Workload w;
  w.ops.push_back({op, attrs, {}});
  for (size_t i = 0; i < inputs.size(); ++i) {
    w.inputs.push_back(type(inputs[i]));
    w.ops[0].args.push_back("in" + std::to_string(i));
  }
  w.outputs = {"op0"};
  te::ComputeDAG dag;
  try {
    w.ops[0].attrs = ops::complete_attrs(*def, attrs);
    dag = w.build_dag();
  } catch (const std::invalid_argument &e) {
    fail(e.what());
  }
  const te::Tensor &result = dag.outputs.at(0);
  std::string base = node_->output_size() ? node_->output(0) : op;
  bool all_constant = std::all_of(inputs.begin(), inputs.end(), [&](ValueId v) { return value(v).is_constant(); });
  if (all_constant) {
    check_constant_shape(result.shape(), "the constant result");
    std::vector<ir::HostTensor> args;
    for (ValueId v : inputs) args.push_back(*value(v).constant);
    std::vector<ir::HostTensor> out = ir::interpret(te::lower(dag, op), args);
    return add_constant(std::move(out.at(0)), base);
  }
  Value v;
  v.name = fresh_name(base);
  v.type = {result.shape(), result.dtype()};
  ValueId id = graph_.add_value(std::move(v));
  graph_.nodes.push_back(Node{op, w.ops[0].attrs, inputs, id, node_->name().empty() ? base : node_->name()});
  return id;
}

void ImportContext::set_output(int i, ValueId v) {
  if (i >= node_->output_size() || node_->output(i).empty()) return;
  const std::string &wanted = node_->output(i);
  auto id = static_cast<size_t>(v);
  if (id >= first_value_of_node_ && graph_.values[id].name != wanted) {
    // Swap names with the value of this node that holds the output's name, if any; a
    // name an earlier node's value holds stays with it.
    bool held_elsewhere = names_.count(wanted) > 0;
    for (size_t k = first_value_of_node_; k < graph_.values.size(); ++k) {
      if (graph_.values[k].name == wanted) {
        graph_.values[k].name = graph_.values[id].name;
        held_elsewhere = false;
        break;
      }
    }
    if (!held_elsewhere) {
      names_.insert(wanted);
      graph_.values[id].name = wanted;
    }
  }
  bind(wanted, v);
}

void ImportContext::require_unused_output(int i, const std::string &what) const {
  if (i < node_->output_size() && !node_->output(i).empty() && used_.count(node_->output(i)))
    fail("its output " + std::to_string(i) + " (" + what + ") is used, which Kiln does not support");
}

}  // namespace kiln::frontend
