// What the graph passes share: who reads a value, constants' values per channel, axis
// permutations of images. Internal to the passes (frontend/passes.h is their interface).
#pragma once

#include <optional>
#include <vector>

#include "frontend/graph.h"

namespace kiln::frontend::detail {

// Who reads each value: node indices, and whether a graph output is it.
struct Uses {
  std::vector<std::vector<size_t>> readers;
  std::vector<bool> is_output;

  explicit Uses(const Graph &g);
  // Read by exactly one node and not a graph output: a rewrite may absorb it.
  bool single_use(ValueId v) const;
};

// Replaces every read of `from` with `to`.
void replace_uses(Graph &g, ValueId from, ValueId to);

// The single element of a constant, when the value is one.
std::optional<double> scalar_constant(const Graph &g, ValueId v);

bool near(std::optional<double> value, double want);

// For a binary node with operands {a, b}: the operand that is not `known`.
std::optional<ValueId> other_operand(const Node &n, ValueId known);

const Node *sole_reader(const Graph &g, const Uses &u, ValueId v);

// Where a conv2d or dense keeps its output channels: the axis of its result, and how
// the weight's elements map to channels.
struct ChannelLayout {
  size_t output_axis;
  int64_t channels;
  bool weight_channel_last;  // HWIO; otherwise the channel is the weight's first axis (OIHW, [N,K])
};

std::optional<ChannelLayout> channel_layout(const Graph &g, const Node &n);

// The constant's value per channel when it varies along `axis` of `shape` alone (or
// not at all) and broadcasting it does not grow the shape.
std::optional<std::vector<double>> per_channel_values(const Value &c, const std::vector<int64_t> &shape, size_t axis);

// A copy of constant `v` with another shape holding the same elements in row-major
// order, as a new value named with `suffix`.
ValueId add_reshaped_constant(Graph &g, ValueId v, const std::vector<int64_t> &shape, const char *suffix);

// Axis permutations of a 4-d image: NCHW -> NHWC and back. Output axis d of a transpose
// is its input's axis perm[d].
extern const std::vector<int64_t> kToNhwc;
extern const std::vector<int64_t> kToNchw;

std::vector<int64_t> permuted(const std::vector<int64_t> &shape, const std::vector<int64_t> &perm);

// A constant's data with its axes permuted (row-major both ways).
ir::HostTensor permuted_data(const ir::HostTensor &t, const std::vector<int64_t> &perm);

ValueId add_permuted_constant(Graph &g, ValueId v, const std::vector<int64_t> &perm, const char *suffix);

// A new computed value shaped like `v` in NHWC, for an operator moved to NHWC.
ValueId add_nhwc_value(Graph &g, ValueId v);

bool is_transpose(const Node &n, const std::vector<int64_t> &perm);

// The image operators that take a layout attribute and have an NHWC form.
bool converts_to_nhwc(const Graph &g, const Node &n);

}  // namespace kiln::frontend::detail
