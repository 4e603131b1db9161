#include "frontend/graph.h"

#include <sstream>

namespace kiln::frontend {

std::string shape_string(const std::vector<int64_t> &shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

ValueId Graph::add_value(Value v) {
  values.push_back(std::move(v));
  return static_cast<ValueId>(values.size() - 1);
}

std::optional<size_t> Graph::producer(ValueId v) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].output == v) return i;
  return std::nullopt;
}

static std::string value_ref(const Graph &g, ValueId v) {
  const Value &value = g.values[static_cast<size_t>(v)];
  return value.is_constant() ? "$" + value.name : "%" + value.name;
}

std::string Graph::to_string() const {
  std::ostringstream out;
  for (ValueId v : inputs) {
    const Value &value = values[static_cast<size_t>(v)];
    out << "input %" << value.name << " : " << shape_string(value.type.shape) << ' ' << ir::dtype_name(value.type.dtype)
        << '\n';
  }
  for (const Node &n : nodes) {
    const Value &result = values[static_cast<size_t>(n.output)];
    out << '%' << result.name << " = " << n.op << '(';
    for (size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", " : "") << value_ref(*this, n.inputs[i]);
    out << ')';
    if (!n.attrs.empty()) out << ' ' << n.attrs.dump();
    out << " : " << shape_string(result.type.shape) << ' ' << ir::dtype_name(result.type.dtype) << '\n';
  }
  out << "outputs";
  for (ValueId v : outputs) out << ' ' << value_ref(*this, v);
  out << '\n';
  return out.str();
}

nlohmann::json Graph::to_json() const {
  auto type_json = [](const ir::TensorType &t) {
    return nlohmann::json{{"shape", t.shape}, {"dtype", ir::dtype_name(t.dtype)}};
  };
  nlohmann::json j;
  j["inputs"] = nlohmann::json::array();
  for (ValueId v : inputs) {
    nlohmann::json in = type_json(values[static_cast<size_t>(v)].type);
    in["name"] = values[static_cast<size_t>(v)].name;
    j["inputs"].push_back(in);
  }
  j["nodes"] = nlohmann::json::array();
  for (const Node &n : nodes) {
    nlohmann::json node{{"op", n.op}, {"attrs", n.attrs}, {"source", n.source}};
    node["inputs"] = nlohmann::json::array();
    for (ValueId v : n.inputs) node["inputs"].push_back(values[static_cast<size_t>(v)].name);
    node["output"] = type_json(values[static_cast<size_t>(n.output)].type);
    node["output"]["name"] = values[static_cast<size_t>(n.output)].name;
    j["nodes"].push_back(node);
  }
  j["outputs"] = nlohmann::json::array();
  for (ValueId v : outputs) j["outputs"].push_back(values[static_cast<size_t>(v)].name);
  return j;
}

}  // namespace kiln::frontend
