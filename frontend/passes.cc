#include "frontend/passes.h"

#include "frontend/fusion.h"
#include "ir/ops/winograd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace kiln::frontend {
namespace {

// Who reads each value: node indices, and whether a graph output is it.
struct Uses {
  std::vector<std::vector<size_t>> readers;
  std::vector<bool> is_output;

  explicit Uses(const Graph &g) : readers(g.values.size()), is_output(g.values.size(), false) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId in : g.nodes[i].inputs) readers[static_cast<size_t>(in)].push_back(i);
    for (ValueId v : g.outputs) is_output[static_cast<size_t>(v)] = true;
  }
  // Read by exactly one node and not a graph output: a rewrite may absorb it.
  bool single_use(ValueId v) const {
    return readers[static_cast<size_t>(v)].size() == 1 && !is_output[static_cast<size_t>(v)];
  }
};

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

// Where a conv2d or dense keeps its output channels: the axis of its result, and how
// the weight's elements map to channels.
struct ChannelLayout {
  size_t output_axis;
  int64_t channels;
  bool weight_channel_last;  // HWIO; otherwise the channel is the weight's first axis (OIHW, [N,K])
};

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

// Axis permutations of a 4-d image: NCHW -> NHWC and back. Output axis d of a transpose
// is its input's axis perm[d].
const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

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
  static const std::set<std::string> pools = {"max_pool2d", "avg_pool2d", "global_avg_pool2d"};
  if (n.attrs.value("layout", std::string("NHWC")) != "NCHW") return false;
  if (g.values[static_cast<size_t>(n.inputs[0])].type.shape.size() != 4) return false;
  if (pools.count(n.op)) return true;
  // A convolution's weight is reordered to HWIO here, so it must be a constant.
  return n.op == "conv2d" && g.values[static_cast<size_t>(n.inputs[1])].is_constant() &&
         g.values[static_cast<size_t>(n.inputs[0])].type.dtype == ir::DType::kFloat32;
}
}  // namespace

int fold_channel_affine(Graph &graph) {
  int folded = 0;
  for (bool changed = true; changed;) {
    changed = false;
    Uses u(graph);
    for (size_t i = 0; i < graph.nodes.size() && !changed; ++i) {
      const Node &n = graph.nodes[i];
      bool scales = n.op == "mul" || n.op == "div", shifts = n.op == "add" || n.op == "sub";
      if (n.inputs.size() != 2 || (!scales && !shifts)) continue;
      // The product is the first operand, or the second of a commutative operation.
      for (size_t side = 0; side < 2 && !changed; ++side) {
        if (side == 1 && (n.op == "div" || n.op == "sub")) break;
        ValueId product = n.inputs[side];
        std::optional<size_t> p = graph.producer(product);
        if (!p || !u.single_use(product)) continue;
        const Node &producer = graph.nodes[*p];
        std::optional<ChannelLayout> layout = channel_layout(graph, producer);
        // Copies: adding values below may move graph.values.
        const Value result = graph.values[static_cast<size_t>(product)];
        if (!layout || result.type.dtype != ir::DType::kFloat32 ||
            graph.values[static_cast<size_t>(n.output)].type.shape != result.type.shape)
          continue;
        std::optional<std::vector<double>> c = per_channel_values(graph.values[static_cast<size_t>(n.inputs[1 - side])],
                                                                  result.type.shape, layout->output_axis);
        const Value weight = graph.values[static_cast<size_t>(producer.inputs[1])];
        bool has_bias = producer.inputs.size() == 3;
        std::optional<Value> bias;
        if (has_bias) bias = graph.values[static_cast<size_t>(producer.inputs[2])];
        if (!c || !weight.is_constant() || (bias && !bias->is_constant())) continue;

        std::vector<double> scale(c->size(), 1.0), shift(c->size(), 0.0);
        for (size_t k = 0; k < c->size(); ++k) {
          double v = (*c)[k];
          if (n.op == "mul") scale[k] = v;
          if (n.op == "div") scale[k] = 1.0 / v;
          if (n.op == "add") shift[k] = v;
          if (n.op == "sub") shift[k] = -v;
        }
        Node rewritten = producer;
        if (scales) {
          ir::HostTensor w = *weight.constant;
          int64_t per_channel = w.size() / layout->channels;
          for (int64_t e = 0; e < w.size(); ++e) {
            int64_t k = layout->weight_channel_last ? e % layout->channels : e / per_channel;
            w.set(e, w.get(e) * scale[static_cast<size_t>(k)]);
          }
          Value scaled = weight;
          scaled.name += "_folded";
          scaled.constant = std::make_shared<const ir::HostTensor>(std::move(w));
          rewritten.inputs[1] = graph.add_value(std::move(scaled));
        }
        if (has_bias || shifts) {
          ir::HostTensor b(ir::DType::kFloat32, {layout->channels});
          for (int64_t k = 0; k < layout->channels; ++k) {
            double old = bias ? bias->constant->get(bias->constant->size() == 1 ? 0 : k) : 0.0;
            b.set(k, old * scale[static_cast<size_t>(k)] + shift[static_cast<size_t>(k)]);
          }
          ValueId new_bias = graph.add_value(Value{result.name + "_bias",
                                                   {{layout->channels}, ir::DType::kFloat32},
                                                   std::make_shared<const ir::HostTensor>(std::move(b))});
          if (has_bias)
            rewritten.inputs[2] = new_bias;
          else
            rewritten.inputs.push_back(new_bias);
        }
        // The producer computes the folded result in the operation's place.
        rewritten.output = graph.nodes[i].output;
        graph.nodes[i] = std::move(rewritten);
        graph.nodes.erase(graph.nodes.begin() + static_cast<long>(*p));
        ++folded;
        changed = true;
      }
    }
  }
  return folded;
}

int eliminate_dead_nodes(Graph &graph) {
  std::vector<bool> live(graph.values.size(), false);
  for (ValueId v : graph.outputs) live[static_cast<size_t>(v)] = true;
  std::vector<bool> keep(graph.nodes.size(), false);
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node &n = graph.nodes[i];
    if (!live[static_cast<size_t>(n.output)]) continue;
    keep[i] = true;
    for (ValueId in : n.inputs) live[static_cast<size_t>(in)] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(graph.nodes[i]));
  int removed = static_cast<int>(graph.nodes.size() - kept.size());
  graph.nodes = std::move(kept);
  return removed;
}

int eliminate_common_subexpressions(Graph &graph) {
  std::map<std::tuple<std::string, std::string, std::vector<ValueId>>, ValueId> seen;
  std::vector<Node> kept;
  int removed = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node n = graph.nodes[i];  // its inputs may have been renamed by an earlier merge
    auto [it, fresh] = seen.emplace(std::make_tuple(n.op, n.attrs.dump(), n.inputs), n.output);
    if (fresh) {
      kept.push_back(std::move(n));
      continue;
    }
    ++removed;
    replace_uses(graph, n.output, it->second);
  }
  graph.nodes = std::move(kept);
  return removed;
}

int rewrite_gelu(Graph &graph) {
  int rewritten = 0;
  for (size_t e = 0; e < graph.nodes.size(); ++e) {
    if (graph.nodes[e].op != "erf") continue;
    Uses u(graph);
    const Node &erf = graph.nodes[e];
    // erf(x / sqrt(2)) or erf(x * (1 / sqrt(2)))
    std::optional<size_t> scale_i = graph.producer(erf.inputs[0]);
    if (!scale_i || !u.single_use(erf.inputs[0])) continue;
    const Node &scale = graph.nodes[*scale_i];
    if (scale.inputs.size() != 2) continue;
    ValueId x = scale.inputs[0];
    bool scaled = (scale.op == "div" && near(scalar_constant(graph, scale.inputs[1]), std::sqrt(2.0))) ||
                  (scale.op == "mul" && near(scalar_constant(graph, scale.inputs[1]), 1 / std::sqrt(2.0)));
    if (!scaled) continue;
    // + 1
    const Node *plus = sole_reader(graph, u, erf.output);
    std::optional<ValueId> one = plus && plus->op == "add" ? other_operand(*plus, erf.output) : std::nullopt;
    if (!one || !near(scalar_constant(graph, *one), 1.0)) continue;
    // * x and * 0.5, in either order: x * (1 + erf) then * 0.5, or (x * 0.5) * (1 + erf)
    const Node *times = sole_reader(graph, u, plus->output);
    if (!times || times->op != "mul") continue;
    std::optional<ValueId> factor = other_operand(*times, plus->output);
    ValueId result;
    std::vector<size_t> absorbed;
    if (factor && *factor == x) {
      const Node *half = sole_reader(graph, u, times->output);
      std::optional<ValueId> h = half && half->op == "mul" ? other_operand(*half, times->output) : std::nullopt;
      if (!h || !near(scalar_constant(graph, *h), 0.5)) continue;
      result = half->output;
    } else if (factor) {
      std::optional<size_t> half_i = graph.producer(*factor);
      if (!half_i || !u.single_use(*factor)) continue;
      const Node &half = graph.nodes[*half_i];
      std::optional<ValueId> h = half.op == "mul" ? other_operand(half, x) : std::nullopt;
      if (!h || !near(scalar_constant(graph, *h), 0.5)) continue;
      result = times->output;
    } else {
      continue;
    }
    if (graph.values[static_cast<size_t>(x)].type.shape != graph.values[static_cast<size_t>(result)].type.shape)
      continue;
    // The chain's last node becomes gelu(x); the rest is dead and removed below.
    for (Node &n : graph.nodes)
      if (n.output == result) {
        n = Node{"gelu", nlohmann::json::object(), {x}, result, n.source};
      }
    ++rewritten;
    eliminate_dead_nodes(graph);
    e = 0;
  }
  return rewritten;
}

int rewrite_layer_norm(Graph &graph) {
  int rewritten = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    Uses u(graph);
    for (const Node &mean : graph.nodes) {
      if (mean.op != "reduce_mean" || mean.attrs.value("keepdims", false) != true) continue;
      ValueId x = mean.inputs[0];
      const std::vector<int64_t> shape = graph.values[static_cast<size_t>(x)].type.shape;
      auto last_axis_only = [&](const Node &n) {
        std::vector<int64_t> axes = n.attrs.value("axes", std::vector<int64_t>{});
        return axes.size() == 1 && (axes[0] == -1 || axes[0] == static_cast<int64_t>(shape.size()) - 1);
      };
      if (!last_axis_only(mean)) continue;
      // d = x - mean, read by the square and by the division
      const std::vector<size_t> &mean_readers = u.readers[static_cast<size_t>(mean.output)];
      if (mean_readers.size() != 1 || u.is_output[static_cast<size_t>(mean.output)]) continue;
      const Node &sub = graph.nodes[mean_readers[0]];
      if (sub.op != "sub" || sub.inputs[0] != x || sub.inputs[1] != mean.output) continue;
      const std::vector<size_t> &d_readers = u.readers[static_cast<size_t>(sub.output)];
      if (d_readers.size() != 2 || u.is_output[static_cast<size_t>(sub.output)]) continue;
      const Node *pow = nullptr, *div = nullptr;
      for (size_t r : d_readers) {
        const Node &n = graph.nodes[r];
        if (n.op == "pow" && n.inputs[0] == sub.output && near(scalar_constant(graph, n.inputs[1]), 2.0)) pow = &n;
        if (n.op == "div" && n.inputs[0] == sub.output) div = &n;
      }
      if (!pow || !div) continue;
      const Node *var = sole_reader(graph, u, pow->output);
      if (!var || var->op != "reduce_mean" || var->attrs.value("keepdims", false) != true || !last_axis_only(*var))
        continue;
      const Node *add_eps = sole_reader(graph, u, var->output);
      std::optional<ValueId> eps_v =
          add_eps && add_eps->op == "add" ? other_operand(*add_eps, var->output) : std::nullopt;
      std::optional<double> eps = eps_v ? scalar_constant(graph, *eps_v) : std::nullopt;
      if (!eps || *eps < 0) continue;
      const Node *sqrt = sole_reader(graph, u, add_eps->output);
      if (!sqrt || sqrt->op != "sqrt" || !u.single_use(sqrt->output) || div->inputs[1] != sqrt->output) continue;
      const Node *scale = sole_reader(graph, u, div->output);
      std::optional<ValueId> gamma = scale && scale->op == "mul" ? other_operand(*scale, div->output) : std::nullopt;
      if (!gamma) continue;
      const Node *shift = sole_reader(graph, u, scale->output);
      std::optional<ValueId> beta = shift && shift->op == "add" ? other_operand(*shift, scale->output) : std::nullopt;
      if (!beta) continue;
      // gamma and beta must be shaped like the normalized (last) axis.
      std::vector<int64_t> axis_shape = {shape.back()};
      auto per_channel = [&](ValueId v) {
        const Value &value = graph.values[static_cast<size_t>(v)];
        if (!value.is_constant()) return false;
        int64_t n = value.constant->size();
        return n == shape.back() && value.type.shape.back() == shape.back();
      };
      if (!per_channel(*gamma) || !per_channel(*beta)) continue;
      ValueId result = shift->output;
      ValueId g = add_reshaped_constant(graph, *gamma, axis_shape, "_ln");
      ValueId b = add_reshaped_constant(graph, *beta, axis_shape, "_ln");
      for (Node &n : graph.nodes)
        if (n.output == result) n = Node{"layer_norm", {{"axis", -1}, {"epsilon", *eps}}, {x, g, b}, result, n.source};
      ++rewritten;
      eliminate_dead_nodes(graph);
      changed = true;
      break;
    }
  }
  return rewritten;
}

int sink_reshapes_below_bias(Graph &graph) {
  static const std::set<std::string> elementwise_binary = {"add", "sub", "mul", "div", "maximum", "minimum"};
  int moved = 0;
  Uses u(graph);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node &op = graph.nodes[i];
    bool unary = op.inputs.size() == 1 && op_pattern(op.op) == OpPattern::kElementwise;
    if (!elementwise_binary.count(op.op) && !unary) continue;
    for (int side = 0; side < static_cast<int>(op.inputs.size()); ++side) {
      ValueId reshaped = op.inputs[static_cast<size_t>(side)];
      std::optional<size_t> r = graph.producer(reshaped);
      if (!r || graph.nodes[*r].op != "reshape" || !u.single_use(reshaped)) continue;
      ValueId source = graph.nodes[*r].inputs[0];
      const std::vector<int64_t> &from = graph.values[static_cast<size_t>(source)].type.shape;
      const std::vector<int64_t> &to = graph.values[static_cast<size_t>(reshaped)].type.shape;
      const std::vector<int64_t> &out = graph.values[static_cast<size_t>(op.output)].type.shape;
      // The constant varies along the last axis only, the reshape keeps that axis, and
      // the operation's result has the reshaped shape (the constant does not grow it).
      // A unary operation commutes with any reshape.
      if (!unary) {
        const Value &c = graph.values[static_cast<size_t>(op.inputs[static_cast<size_t>(1 - side)])];
        bool last_axis_only =
            c.is_constant() && !c.type.shape.empty() && !from.empty() && !to.empty() && from.back() == to.back() &&
            out == to && c.type.shape.size() <= from.size() &&
            std::all_of(c.type.shape.begin(), c.type.shape.end() - 1, [](int64_t d) { return d == 1; });
        if (!last_axis_only) continue;
      }
      // op(reshape(y), c) -> reshape(op(y, c)): the operation takes y's shape and the
      // reshape moves to its result.
      ValueId result = op.output;
      Value narrow = graph.values[static_cast<size_t>(result)];
      narrow.type.shape = from;
      narrow.name += "_unreshaped";
      ValueId inner = graph.add_value(std::move(narrow));
      Node &reshape = graph.nodes[*r];
      Node &binary = graph.nodes[i];
      binary.inputs[static_cast<size_t>(side)] = source;
      binary.output = inner;
      reshape.inputs = {inner};
      reshape.output = result;
      // The reshape now reads the operation's result: it must come after it.
      Node moved_reshape = reshape;
      graph.nodes.erase(graph.nodes.begin() + static_cast<long>(*r));
      graph.nodes.insert(graph.nodes.begin() + static_cast<long>(i), moved_reshape);
      ++moved;
      u = Uses(graph);
      break;
    }
  }
  return moved;
}

int merge_reshapes(Graph &graph) {
  int merged = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node &n = graph.nodes[i];
    if (n.op != "reshape" && n.op != "flatten") continue;
    std::optional<size_t> p = graph.producer(n.inputs[0]);
    if (p && (graph.nodes[*p].op == "reshape" || graph.nodes[*p].op == "flatten")) {
      // Row-major reshapes compose: the outer one alone gives the same elements.
      const std::vector<int64_t> &shape = graph.values[static_cast<size_t>(n.output)].type.shape;
      n = Node{"reshape", {{"shape", shape}}, {graph.nodes[*p].inputs[0]}, n.output, n.source};
      ++merged;
    }
    ValueId source = n.inputs[0];
    if (graph.values[static_cast<size_t>(source)].type.shape ==
        graph.values[static_cast<size_t>(n.output)].type.shape) {
      replace_uses(graph, n.output, source);
      ++merged;
    }
  }
  eliminate_dead_nodes(graph);
  return merged;
}

int convert_images_to_nhwc(Graph &graph) {
  // 1. Each image operator runs in NHWC between a transpose in and a transpose out.
  int converted = 0;
  std::vector<Node> nodes;
  for (Node &n : graph.nodes) {
    if (!converts_to_nhwc(graph, n)) {
      nodes.push_back(std::move(n));
      continue;
    }
    Node in{"transpose", {{"perm", kToNhwc}}, {n.inputs[0]}, add_nhwc_value(graph, n.inputs[0]), n.source};
    Node op = n;
    op.attrs["layout"] = "NHWC";
    op.inputs[0] = in.output;
    if (op.op == "conv2d") op.inputs[1] = add_permuted_constant(graph, n.inputs[1], {2, 3, 1, 0}, "_hwio");  // OIHW
    op.output = add_nhwc_value(graph, n.output);
    Node out{"transpose", {{"perm", kToNchw}}, {op.output}, n.output, n.source};
    nodes.push_back(std::move(in));
    nodes.push_back(std::move(op));
    nodes.push_back(std::move(out));
    ++converted;
  }
  graph.nodes = std::move(nodes);

  // 2. Transposes back to NCHW sink below element-wise operators and channel concats
  //    whose computed operands all come out of one (constants are reordered alike), and
  //    3. a transpose of a transpose that undoes it reads the original. Both until
  //    nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      Node &n = graph.nodes[i];
      const std::vector<int64_t> out_shape = graph.values[static_cast<size_t>(n.output)].type.shape;
      const bool concat = n.op == "concat";
      if ((op_pattern(n.op) != OpPattern::kElementwise && !concat) || out_shape.size() != 4) continue;
      std::vector<ValueId> inputs;
      bool sinks = true, any_transposed = false;
      for (ValueId in : n.inputs) {
        const Value &v = graph.values[static_cast<size_t>(in)];
        std::optional<size_t> p = graph.producer(in);
        // An element-wise operand has the result's shape (activations do not broadcast
        // here); a concat's operands differ along its axis.
        if (p && is_transpose(graph.nodes[*p], kToNchw) && (concat || v.type.shape == out_shape)) {
          inputs.push_back(graph.nodes[*p].inputs[0]);
          any_transposed = true;
        } else if (v.is_constant() && v.constant->size() == 1 && v.type.shape.size() <= 1 && !concat) {
          inputs.push_back(in);
        } else if (v.is_constant() && v.type.shape.size() <= 4) {
          // Broadcasting aligns the trailing axes: a constant of lower rank gains leading 1s.
          std::vector<int64_t> shape4(4 - v.type.shape.size(), 1);
          shape4.insert(shape4.end(), v.type.shape.begin(), v.type.shape.end());
          ValueId four = add_reshaped_constant(graph, in, shape4, "");
          inputs.push_back(add_permuted_constant(graph, four, kToNhwc, "_nhwc"));
        } else {
          sinks = false;
          break;
        }
      }
      if (!sinks || !any_transposed) continue;
      // Values grew above, nodes did not: n is still this node.
      const ValueId original = n.output;
      n.inputs = inputs;
      n.output = add_nhwc_value(graph, original);
      if (concat) {
        // NCHW axis a is NHWC axis d where kToNhwc[d] == a.
        int64_t axis = n.attrs.value("axis", int64_t{0});
        if (axis < 0) axis += 4;
        n.attrs["axis"] = std::find(kToNhwc.begin(), kToNhwc.end(), axis) - kToNhwc.begin();
      }
      Node back{"transpose", {{"perm", kToNchw}}, {n.output}, original, n.source};
      graph.nodes.insert(graph.nodes.begin() + static_cast<long>(i) + 1, std::move(back));
      changed = true;
    }
    for (Node &n : graph.nodes) {
      if (!is_transpose(n, kToNhwc)) continue;
      std::optional<size_t> p = graph.producer(n.inputs[0]);
      if (!p || !is_transpose(graph.nodes[*p], kToNchw)) continue;
      ValueId original = graph.nodes[*p].inputs[0];
      replace_uses(graph, n.output, original);
      changed = true;
    }
    if (changed) eliminate_dead_nodes(graph);
  }

  // 4. A transpose that moves only axes of extent 1 (a pooled [N,1,1,C] back to
  //    [N,C,1,1]) keeps the elements in order: a reshape, which merges with the flatten
  //    that usually follows.
  for (Node &n : graph.nodes) {
    if (n.op != "transpose") continue;
    const std::vector<int64_t> &in_shape = graph.values[static_cast<size_t>(n.inputs[0])].type.shape;
    std::vector<int64_t> perm = n.attrs.value("perm", std::vector<int64_t>{});
    std::vector<int64_t> moved;
    for (int64_t p : perm)
      if (in_shape[static_cast<size_t>(p)] != 1) moved.push_back(p);
    if (perm.size() == in_shape.size() && std::is_sorted(moved.begin(), moved.end()))
      n = Node{
          "reshape", {{"shape", graph.values[static_cast<size_t>(n.output)].type.shape}}, n.inputs, n.output, n.source};
  }
  merge_reshapes(graph);
  return converted;
}

namespace {

// How a Winograd convolution tiles its output: m x m blocks, tiles_h x tiles_w of them.
struct WinogradTiling {
  int64_t output_tile = 2;
  int64_t tiles_h = 0, tiles_w = 0;
};

// The Winograd form of an NHWC convolution, when it pays (passes.h).
std::optional<WinogradTiling> winograd_tiling(const Graph &g, const Node &n) {
  if (n.op != "conv2d" || n.attrs.value("layout", std::string()) != "NHWC") return std::nullopt;
  if (n.attrs.value("strides", std::vector<int64_t>{}) != std::vector<int64_t>{1, 1} ||
      n.attrs.value("dilations", std::vector<int64_t>{}) != std::vector<int64_t>{1, 1} ||
      n.attrs.value("groups", int64_t{0}) != 1)
    return std::nullopt;
  const Value &data = g.values[static_cast<size_t>(n.inputs[0])];
  const Value &weight = g.values[static_cast<size_t>(n.inputs[1])];
  const std::vector<int64_t> &ws = weight.type.shape;
  if (!weight.is_constant() || weight.type.dtype != ir::DType::kFloat32 || data.type.dtype != ir::DType::kFloat32 ||
      ws.size() != 4 || ws[0] != 3 || ws[1] != 3 || ws[2] < 8 || ws[3] < 8)
    return std::nullopt;
  const std::vector<int64_t> &out = g.values[static_cast<size_t>(n.output)].type.shape;
  // Multiply-adds per input and output channel pair: 9 per output directly, (m+2)^2 per
  // m x m tile.
  auto tiling = [&](int64_t m) { return WinogradTiling{m, (out[1] + m - 1) / m, (out[2] + m - 1) / m}; };
  auto products = [](const WinogradTiling &t) {
    const int64_t a = t.output_tile + 2;
    return a * a * t.tiles_h * t.tiles_w;
  };
  const WinogradTiling f2 = tiling(2), f4 = tiling(4);
  if (2 * products(f2) > 9 * out[1] * out[2]) return std::nullopt;
  if (10 * products(f4) <= 7 * products(f2)) return f4;
  return f2;
}

// U[a*A+b, c, o] = (G g[.,.,c,o] Gt)[a, b] for an HWIO weight g (A = m + 2), in double.
ValueId add_winograd_weight(Graph &g, ValueId weight, const ops::WinogradMatrices &w) {
  Value copy = g.values[static_cast<size_t>(weight)];
  const ir::HostTensor &filter = *copy.constant;
  const int64_t channels = filter.shape()[2], outs = filter.shape()[3], a = w.input_tile;
  ir::HostTensor u(ir::DType::kFloat32, {a * a, channels, outs});
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t o = 0; o < outs; ++o) {
      auto at = [&](int64_t i, int64_t j) { return filter.get(((i * 3 + j) * channels + c) * outs + o); };
      for (int64_t r = 0; r < a; ++r)
        for (int64_t s = 0; s < a; ++s) {
          double sum = 0;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j)
              sum += w.g[static_cast<size_t>(r)][static_cast<size_t>(i)] * at(i, j) *
                     w.g[static_cast<size_t>(s)][static_cast<size_t>(j)];
          u.set(((r * a + s) * channels + c) * outs + o, sum);
        }
    }
  copy.type.shape = u.shape();
  copy.constant = std::make_shared<const ir::HostTensor>(std::move(u));
  copy.name += "_winograd";
  return g.add_value(std::move(copy));
}

}  // namespace

int rewrite_winograd_convolutions(Graph &graph) {
  int rewritten = 0;
  std::vector<Node> nodes;
  for (Node &n : graph.nodes) {
    std::optional<WinogradTiling> tiling = winograd_tiling(graph, n);
    if (!tiling) {
      nodes.push_back(std::move(n));
      continue;
    }
    const ops::WinogradMatrices &w = *ops::winograd_matrices(tiling->output_tile);
    const std::vector<int64_t> out = graph.values[static_cast<size_t>(n.output)].type.shape;
    const int64_t channels = graph.values[static_cast<size_t>(n.inputs[0])].type.shape[3];
    const int64_t tile_count = out[0] * tiling->tiles_h * tiling->tiles_w;
    auto add_products = [&](int64_t columns, const char *suffix) {
      Value v = graph.values[static_cast<size_t>(n.output)];
      v.type.shape = {w.input_tile * w.input_tile, tile_count, columns};
      v.name += suffix;
      return graph.add_value(std::move(v));
    };
    Node input{"winograd_input_transform",
               {{"output_tile", w.output_tile}, {"pads", n.attrs["pads"]}},
               {n.inputs[0]},
               add_products(channels, "_winograd_in"),
               n.source};
    Node product{"batch_matmul",
                 {{"transpose_a", false}, {"transpose_b", false}},
                 {input.output, add_winograd_weight(graph, n.inputs[1], w)},
                 add_products(out[3], "_winograd_products"),
                 n.source};
    std::vector<ValueId> output_inputs = {product.output};
    if (n.inputs.size() > 2) output_inputs.push_back(n.inputs[2]);
    Node output{"winograd_output_transform",
                {{"height", out[1]}, {"output_tile", w.output_tile}, {"width", out[2]}},
                output_inputs,
                n.output,
                n.source};
    nodes.push_back(std::move(input));
    nodes.push_back(std::move(product));
    nodes.push_back(std::move(output));
    ++rewritten;
  }
  graph.nodes = std::move(nodes);
  if (rewritten > 0) eliminate_dead_nodes(graph);
  return rewritten;
}

void run_default_passes(Graph &graph) {
  eliminate_common_subexpressions(graph);
  fold_channel_affine(graph);
  rewrite_layer_norm(graph);
  rewrite_gelu(graph);
  sink_reshapes_below_bias(graph);
  merge_reshapes(graph);
  eliminate_dead_nodes(graph);
}

}  // namespace kiln::frontend
