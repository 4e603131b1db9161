#include "ops/workload.h"

#include "support/json_checks.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "ops/registry.h"
#include "support/sha256.h"

namespace kiln::ops {

using namespace kiln::ir;

using nlohmann::json;

Workload Workload::single(const std::string &op, std::vector<TensorType> inputs, json attrs) {
  Workload w;
  OpCall call{op, std::move(attrs), {}};
  for (size_t i = 0; i < inputs.size(); ++i) call.args.push_back("in" + std::to_string(i));
  w.inputs = std::move(inputs);
  w.ops.push_back(std::move(call));
  w.outputs = {"op0"};
  return w;
}

static json complete(const OpCall &call) {
  const ops::OpDef *def = ops::find_op(call.op);
  if (!def) throw std::invalid_argument("unknown operator '" + call.op + "'; `kiln ops` lists the operators");
  return ops::complete_attrs(*def, call.attrs);
}

json Workload::to_json() const {
  json j;
  j["kiln_workload"] = kFormatVersion;
  j["inputs"] = json::array();
  for (const TensorType &t : inputs) {
    json input{{"shape", t.shape}, {"dtype", dtype_name(t.dtype)}};
    if (t.constant) input["constant"] = true;
    j["inputs"].push_back(std::move(input));
  }
  j["ops"] = json::array();
  for (const OpCall &c : ops) j["ops"].push_back({{"op", c.op}, {"attrs", complete(c)}, {"args", c.args}});
  j["outputs"] = outputs;
  return j;
}

std::string Workload::canonical_string() const { return to_json().dump(); }

std::string Workload::key_hash() const { return support::sha256_hex(canonical_string()); }

std::string Workload::summary() const {
  std::ostringstream os;
  for (size_t i = 0; i < ops.size(); ++i) os << (i ? "+" : "") << ops[i].op;
  if (!inputs.empty()) {
    os << " ";
    for (size_t d = 0; d < inputs[0].shape.size(); ++d) os << (d ? "x" : "") << inputs[0].shape[d];
  }
  return os.str();
}

namespace {

/// `object[key]`, which must be there; `where` names the object in the message.
const json &required_field(const json &object, const char *key, const std::string &where, const char *what) {
  auto it = object.find(key);
  if (it == object.end())
    throw std::invalid_argument(where + " has no \"" + key + "\" (" + what +
                                "); docs/workload-key.md shows the format");
  return *it;
}

std::vector<std::string> string_list(const json &value, const std::string &what) {
  if (!value.is_array())
    throw std::invalid_argument(what + " is a list of strings, not " + support::json_excerpt(value));
  std::vector<std::string> out;
  for (const json &item : value) {
    if (!item.is_string())
      throw std::invalid_argument(what + " is a list of strings; found " + support::json_excerpt(item));
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

Workload Workload::from_json(const json &j) {
  try {
    if (!j.is_object()) throw std::invalid_argument("a workload is a JSON object");
    support::require_max_depth(j, "a workload");
    if (j.contains("kiln_workload")) support::require_int64_numbers(j.at("kiln_workload"), "\"kiln_workload\"");
    if (j.contains("inputs")) support::require_int64_numbers(j.at("inputs"), "the inputs' shapes");
    if (j.contains("kiln_workload") && !j.at("kiln_workload").is_number_integer())
      throw std::invalid_argument("\"kiln_workload\" is the format version, a whole number");
    int version = j.value("kiln_workload", kFormatVersion);
    if (version != kFormatVersion)
      throw std::invalid_argument("workload format version " + std::to_string(version) +
                                  " is not supported; this Kiln reads version " + std::to_string(kFormatVersion));
    Workload w;
    const json &inputs = required_field(j, "inputs", "the workload", "its input tensors");
    if (!inputs.is_array())
      throw std::invalid_argument("\"inputs\" is a list of tensors ({\"shape\": [...], \"dtype\": ...}), not " +
                                  support::json_excerpt(inputs));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const json &t = inputs[i];
      std::string where = "input in" + std::to_string(i);
      if (!t.is_object())
        throw std::invalid_argument(where + " is an object ({\"shape\": [...], \"dtype\": ...}), not " +
                                    support::json_excerpt(t));
      const json &shape = required_field(t, "shape", where, "its extents");
      if (!shape.is_array() ||
          !std::all_of(shape.begin(), shape.end(), [](const json &d) { return d.is_number_integer(); }))
        throw std::invalid_argument(where + "'s \"shape\" is a list of whole numbers, not " +
                                    support::json_excerpt(shape));
      if (t.contains("dtype") && !t.at("dtype").is_string())
        throw std::invalid_argument(where + "'s \"dtype\" is a type name such as \"float32\", not " +
                                    support::json_excerpt(t.at("dtype")));
      if (t.contains("constant") && !t.at("constant").is_boolean())
        throw std::invalid_argument("an input's \"constant\" is true or false");
      TensorType tt{shape.get<std::vector<int64_t>>(), parse_dtype(t.value("dtype", "float32")),
                    t.value("constant", false)};
      w.inputs.push_back(std::move(tt));
    }
    const json &ops = required_field(j, "ops", "the workload", "the operators it applies");
    if (!ops.is_array())
      throw std::invalid_argument("\"ops\" is a list of operator calls ({\"op\": ..., \"args\": [...]}), not " +
                                  support::json_excerpt(ops));
    for (size_t k = 0; k < ops.size(); ++k) {
      const json &c = ops[k];
      std::string where = "op" + std::to_string(k);
      if (!c.is_object())
        throw std::invalid_argument(where + " is an object ({\"op\": ..., \"args\": [...]}), not " +
                                    support::json_excerpt(c));
      const json &name = required_field(c, "op", where, "the operator's name");
      if (!name.is_string())
        throw std::invalid_argument(where + "'s \"op\" is an operator name, not " + support::json_excerpt(name));
      if (c.contains("attrs") && !c.at("attrs").is_object())
        throw std::invalid_argument(where + "'s \"attrs\" is an object, not " + support::json_excerpt(c.at("attrs")));
      OpCall call{name.get<std::string>(), c.value("attrs", json::object()),
                  string_list(required_field(c, "args", where, "its inputs: in0.., op0.."), where + "'s \"args\"")};
      w.ops.push_back(std::move(call));
    }
    w.outputs =
        string_list(required_field(j, "outputs", "the workload", "the results it returns: op0.."), "\"outputs\"");
    w.build_dag();  // validates references, arity, shapes and attributes
    return w;
  } catch (const json::exception &e) {
    throw std::invalid_argument(std::string("malformed workload JSON: ") + e.what());
  }
}

ir::PrimFunc Workload::lower() const { return te::lower(build_dag(), ops.size() == 1 ? ops[0].op : "fused"); }

te::ComputeDAG Workload::build_dag() const {
  std::vector<te::Tensor> input_tensors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (int64_t d : inputs[i].shape) {
      if (d <= 0) throw std::invalid_argument("input in" + std::to_string(i) + " has a non-positive dimension");
    }
    input_tensors.push_back(te::placeholder(inputs[i].shape, inputs[i].dtype, "in" + std::to_string(i)));
  }
  std::vector<te::Tensor> results;
  auto resolve = [&](const std::string &ref, size_t op_index) -> te::Tensor {
    auto index_of = [&](const std::string &prefix) -> long {
      // Past 9 digits no index can name a tensor, and stol would throw out_of_range.
      if (ref.rfind(prefix, 0) != 0 || ref.size() == prefix.size() || ref.size() > prefix.size() + 9) return -1;
      for (size_t i = prefix.size(); i < ref.size(); ++i)
        if (!isdigit(static_cast<unsigned char>(ref[i]))) return -1;
      return std::stol(ref.substr(prefix.size()));
    };
    if (long i = index_of("in"); i >= 0 && static_cast<size_t>(i) < input_tensors.size()) return input_tensors[i];
    if (long i = index_of("op"); i >= 0 && static_cast<size_t>(i) < op_index) return results[i];
    throw std::invalid_argument("op" + std::to_string(op_index) + " refers to '" + ref +
                                "', which is neither an input (in0..) nor an earlier op result (op0..)");
  };
  for (size_t k = 0; k < ops.size(); ++k) {
    const OpCall &call = ops[k];
    const ops::OpDef *def = ops::find_op(call.op);
    if (!def) throw std::invalid_argument("unknown operator '" + call.op + "'; `kiln ops` lists the operators");
    int n = static_cast<int>(call.args.size());
    if (n < def->min_inputs || (def->max_inputs >= 0 && n > def->max_inputs))
      throw std::invalid_argument(call.op + " takes " + std::to_string(def->min_inputs) +
                                  (def->max_inputs == def->min_inputs ? ""
                                   : def->max_inputs < 0              ? " or more"
                                                                      : " to " + std::to_string(def->max_inputs)) +
                                  " inputs, got " + std::to_string(n));
    std::vector<te::Tensor> args;
    for (const std::string &ref : call.args) args.push_back(resolve(ref, k));
    results.push_back(def->build(args, ops::complete_attrs(*def, call.attrs)));
  }
  std::vector<te::Tensor> outs;
  for (const std::string &ref : outputs) {
    te::Tensor out = resolve(ref, ops.size());
    // An input returned as it is would be timed as a kernel that computes nothing.
    if (std::any_of(input_tensors.begin(), input_tensors.end(), [&](const te::Tensor &in) { return in.same_as(out); }))
      throw std::invalid_argument("output '" + ref +
                                  "' is an input: a workload's outputs are results of its ops (op0..)");
    outs.push_back(out);
  }
  if (outs.empty()) throw std::invalid_argument("a workload needs at least one output");
  te::ComputeDAG dag = te::make_dag(std::move(input_tensors), std::move(outs));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].constant) dag.constant_inputs.push_back(i);
  return dag;
}

std::vector<int64_t> parse_shape(const std::string &text) {
  constexpr size_t kMaxShapeLength = 256;
  if (text.size() > kMaxShapeLength)
    throw std::invalid_argument("the shape is " + std::to_string(text.size()) + " characters long; at most " +
                                std::to_string(kMaxShapeLength) + " are accepted (e.g. 1x64x56x56)");
  std::vector<int64_t> shape;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used != part.size() || part.empty() || v <= 0)
      throw std::invalid_argument("bad shape '" + text +
                                  "'; expected positive integers joined by 'x', e.g. 1x64x56x56");
    shape.push_back(v);
  }
  if (shape.empty()) throw std::invalid_argument("empty shape; expected e.g. 1x64x56x56");
  // getline drops a trailing empty piece: "2x3x" would read as 2x3.
  if (text.back() == 'x')
    throw std::invalid_argument("bad shape '" + text + "'; expected positive integers joined by 'x', e.g. 1x64x56x56");
  return shape;
}

}  // namespace kiln::ops
