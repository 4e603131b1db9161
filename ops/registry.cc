#include "ops/registry.h"

#include <string>

#include "ops/op_util.h"

namespace kiln::ops {

const std::vector<OpDef> &all_ops() {
  // One explicit list, in documentation order: compute-heavy operators first, then
  // element-wise, reductions, normalisations and layout transforms.
  // Each family's computations have one fusion pattern.
  static const std::vector<OpDef> ops = [] {
    struct Family {
      std::vector<OpDef> (*ops)();
      OpPattern pattern;
    };
    const Family families[] = {
        {&detail::nn_ops, OpPattern::kOutputFusable},        {&detail::winograd_ops, OpPattern::kOutputFusable},
        {&detail::pooling_ops, OpPattern::kReduction},       {&detail::unary_ops, OpPattern::kElementwise},
        {&detail::binary_ops, OpPattern::kElementwise},      {&detail::reduction_ops, OpPattern::kReduction},
        {&detail::normalization_ops, OpPattern::kReduction}, {&detail::transform_ops, OpPattern::kLayout},
    };
    std::vector<OpDef> all;
    for (const Family &family : families) {
      for (OpDef &op : family.ops()) {
        op.pattern = family.pattern;
        all.push_back(std::move(op));
      }
    }
    return all;
  }();
  return ops;
}

const char *to_string(OpPattern pattern) {
  switch (pattern) {
    case OpPattern::kElementwise:
      return "elementwise";
    case OpPattern::kReduction:
      return "reduction";
    case OpPattern::kOutputFusable:
      return "output_fusable";
    case OpPattern::kLayout:
      return "layout";
    case OpPattern::kOpaque:
      return "opaque";
    case OpPattern::kUnspecified:
      break;
  }
  return "unspecified";
}

const OpDef *find_op(std::string_view name) {
  for (const OpDef &op : all_ops()) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

namespace {

// A default list of floats ([1.0, 1.0]) accepts numbers; any other list, integers.
bool is_number_list(const json &default_value) { return !default_value.empty() && default_value[0].is_number_float(); }

// What an attribute's default says about the values it accepts. Numbers are compared by
// kind rather than by JSON type so that 0 is a valid float and 1 a valid `true`; the
// accepted value is then normalised to the default's type, which keeps workload keys
// canonical ({"epsilon": 0} and {"epsilon": 0.0} hash the same).
const char *kind_name(const json &default_value) {
  switch (default_value.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::array:
      return is_number_list(default_value) ? "a list of numbers" : "a list of integers";
    default:
      return "a value";
  }
}

bool is_integer(const json &v) { return v.is_number_integer(); }  // true for signed and unsigned

std::string describe(const json &v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(v.type_name()) + " " + text;
}

// Returns the normalised value, or a null json when `value` does not fit `default_value`.
json coerce(const json &default_value, const json &value) {
  switch (default_value.type()) {
    case json::value_t::string:
      return value.is_string() ? value : json();
    case json::value_t::boolean:
      if (value.is_boolean()) return value;
      // ONNX spells booleans as 0/1 integers (keepdims=1).
      if (is_integer(value) && (value.get<int64_t>() == 0 || value.get<int64_t>() == 1))
        return json(value.get<int64_t>() == 1);
      return json();
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return is_integer(value) ? json(value.get<int64_t>()) : json();
    case json::value_t::number_float:
      return value.is_number() ? json(value.get<double>()) : json();
    case json::value_t::array: {
      if (!value.is_array()) return json();
      json out = json::array();
      for (const json &e : value) {
        if (is_number_list(default_value) ? !e.is_number() : !is_integer(e)) return json();
        if (is_number_list(default_value))
          out.push_back(e.get<double>());
        else
          out.push_back(e.get<int64_t>());
      }
      return out;
    }
    default:
      return value;
  }
}

}  // namespace

json complete_attrs(const OpDef &op, const json &attrs) {
  json out = op.default_attrs.is_object() ? op.default_attrs : json::object();
  if (attrs.is_null()) return out;
  if (!attrs.is_object()) detail::fail(op.name, "attributes must be a JSON object, got " + describe(attrs));
  for (const auto &[name, value] : attrs.items()) {
    auto it = out.find(name);
    if (it == out.end()) {
      std::string valid;
      for (const auto &[known, unused] : out.items()) valid += (valid.empty() ? "" : ", ") + known;
      detail::fail(op.name, "unknown attribute '" + name +
                                "'; valid attributes: " + (valid.empty() ? std::string("(none)") : valid));
    }
    json normalised = coerce(op.default_attrs.at(name), value);
    if (normalised.is_null())
      detail::fail(op.name, "attribute '" + name + "' must be " + kind_name(op.default_attrs.at(name)) + ", got " +
                                describe(value));
    *it = std::move(normalised);
  }
  return out;
}

}  // namespace kiln::ops
