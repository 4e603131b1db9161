#include "frontend/passes/pass_util.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>

namespace kiln::frontend::detail {

Uses::Uses(const Graph &g) : readers(g.values.size()), is_output(g.values.size(), false) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId in : g.nodes[i].inputs) readers[static_cast<size_t>(in)].push_back(i);
  for (ValueId v : g.outputs) is_output[static_cast<size_t>(v)] = true;
}
bool Uses::single_use(ValueId v) const {
  return readers[static_cast<size_t>(v)].size() == 1 && !is_output[static_cast<size_t>(v)];
}

// Replaces every read of `from` with `to`.
void replace_uses(Graph &g, ValueId from, ValueId to) {
  for (Node &n : g.nodes)
    for (ValueId &in : n.inputs)
      if (in == from) in = to;
  for (ValueId &out : g.outputs)
    if (out == from) out = to;
}

// The single element of a constant, when the value is one.
std::optional<double> scalar_constant(const Graph &g, ValueId v) {
  const Value &value = g.values[static_cast<size_t>(v)];
  if (!value.is_constant() || value.constant->size() != 1) return std::nullopt;
  return value.constant->get(0);
}

bool near(std::optional<double> value, double want) {
  return value && std::fabs(*value - want) <= 1e-4 * std::max(1.0, std::fabs(want));
}

// For a binary node with operands {a, b}: the operand that is not `known`.
std::optional<ValueId> other_operand(const Node &n, ValueId known) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == known) return n.inputs[1];
  if (n.inputs[1] == known) return n.inputs[0];
  return std::nullopt;
}

const Node *sole_reader(const Graph &g, const Uses &u, ValueId v) {
  if (!u.single_use(v)) return nullptr;
  return &g.nodes[u.readers[static_cast<size_t>(v)][0]];
}

std::optional<ChannelLayout> channel_layout(const Graph &g, const Node &n) {
  const std::vector<int64_t> &out = g.values[static_cast<size_t>(n.output)].type.shape;
  if (n.op == "dense" && out.size() == 2) return ChannelLayout{1, out[1], false};
  if (n.op != "conv2d" || out.size() != 4) return std::nullopt;
  bool nhwc = n.attrs.value("layout", std::string("NCHW")) == "NHWC";
  return nhwc ? ChannelLayout{3, out[3], true} : ChannelLayout{1, out[1], false};
}

// The constant's value per channel when it varies along `axis` of `shape` alone (or
// not at all) and broadcasting it does not grow the shape.
std::optional<std::vector<double>> per_channel_values(const Value &c, const std::vector<int64_t> &shape, size_t axis) {
  if (!c.is_constant() || c.type.dtype != ir::DType::kFloat32 || c.type.shape.size() > shape.size())
    return std::nullopt;
  size_t offset = shape.size() - c.type.shape.size();
  for (size_t d = 0; d < c.type.shape.size(); ++d) {
    int64_t dim = c.type.shape[d];
    if (dim != 1 && !(d + offset == axis && dim == shape[axis])) return std::nullopt;
  }
  std::vector<double> values(static_cast<size_t>(shape[axis]));
  for (size_t k = 0; k < values.size(); ++k) values[k] = c.constant->get(c.constant->size() == 1 ? 0 : int64_t(k));
  return values;
}

// A copy of constant `v` with another shape holding the same elements in row-major
// order, as a new value named with `suffix`.
ValueId add_reshaped_constant(Graph &g, ValueId v, const std::vector<int64_t> &shape, const char *suffix) {
  Value copy = g.values[static_cast<size_t>(v)];
  ir::HostTensor reshaped(copy.constant->dtype(), shape);
  for (int64_t i = 0; i < reshaped.size(); ++i) reshaped.set(i, copy.constant->get(i));
  copy.type.shape = shape;
  copy.constant = std::make_shared<const ir::HostTensor>(std::move(reshaped));
  copy.name += suffix;
  return g.add_value(std::move(copy));
}

extern const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
extern const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

std::vector<int64_t> permuted(const std::vector<int64_t> &shape, const std::vector<int64_t> &perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(shape[static_cast<size_t>(p)]);
  return out;
}

// A constant's data with its axes permuted (row-major both ways).
ir::HostTensor permuted_data(const ir::HostTensor &t, const std::vector<int64_t> &perm) {
  const std::vector<int64_t> &in_shape = t.shape();
  const size_t rank = in_shape.size();
  ir::HostTensor out(t.dtype(), permuted(in_shape, perm));
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * in_shape[d];
  std::vector<int64_t> index(rank, 0);  // the output position
  for (int64_t flat = 0; flat < out.size(); ++flat) {
    int64_t source = 0;
    for (size_t d = 0; d < rank; ++d) source += index[d] * in_strides[static_cast<size_t>(perm[d])];
    out.set(flat, t.get(source));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out.shape()[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

ValueId add_permuted_constant(Graph &g, ValueId v, const std::vector<int64_t> &perm, const char *suffix) {
  Value copy = g.values[static_cast<size_t>(v)];
  copy.constant = std::make_shared<const ir::HostTensor>(permuted_data(*copy.constant, perm));
  copy.type.shape = copy.constant->shape();
  copy.name += suffix;
  return g.add_value(std::move(copy));
}

// A new computed value shaped like `v` in NHWC, for an operator moved to NHWC.
ValueId add_nhwc_value(Graph &g, ValueId v) {
  Value out = g.values[static_cast<size_t>(v)];
  out.constant = nullptr;
  out.type.shape = permuted(out.type.shape, kToNhwc);
  out.name += "_nhwc";
  return g.add_value(std::move(out));
}

bool is_transpose(const Node &n, const std::vector<int64_t> &perm) {
  return n.op == "transpose" && n.attrs.value("perm", std::vector<int64_t>{}) == perm;
}

// The image operators that take a layout attribute and have an NHWC form.
bool converts_to_nhwc(const Graph &g, const Node &n) {
  static const std::set<std::string> pools = {"max_pool2d", "avg_pool2d", "global_avg_pool2d", "resize"};
  if (n.attrs.value("layout", std::string("NHWC")) != "NCHW") return false;
  if (g.values[static_cast<size_t>(n.inputs[0])].type.shape.size() != 4) return false;
  if (pools.count(n.op)) return true;
  // A convolution's weight is reordered to HWIO here, so it must be a constant.
  return n.op == "conv2d" && g.values[static_cast<size_t>(n.inputs[1])].is_constant() &&
         g.values[static_cast<size_t>(n.inputs[0])].type.dtype == ir::DType::kFloat32;
}

}  // namespace kiln::frontend::detail
