#include <algorithm>
#include <optional>
#include <vector>

#include "frontend/fusion.h"
#include "frontend/passes.h"
#include "frontend/passes/pass_util.h"

namespace kiln::frontend {

using namespace detail;

namespace {

std::vector<size_t> non_unit_axes(const std::vector<int64_t> &shape) {
  std::vector<size_t> axes;
  for (size_t a = 0; a < shape.size(); ++a)
    if (shape[a] != 1) axes.push_back(a);
  return axes;
}

// A reshape that only adds or drops axes of extent 1: the same extents in the same order.
bool only_unit_axes_change(const std::vector<int64_t> &from, const std::vector<int64_t> &to) {
  std::vector<size_t> a = non_unit_axes(from), b = non_unit_axes(to);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (from[a[i]] != to[b[i]]) return false;
  return true;
}

bool is_identity(const std::vector<int64_t> &perm) {
  for (size_t d = 0; d < perm.size(); ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return true;
}

std::vector<int64_t> shape_of(const Graph &g, ValueId v) { return g.values[static_cast<size_t>(v)].type.shape; }

// A transpose of `source`'s elements (or, when the permutation keeps their order, a
// reshape) writing `output`.
Node transpose_or_reshape(const Graph &g, ValueId source, const std::vector<int64_t> &perm, ValueId output,
                          const std::string &origin) {
  if (is_identity(perm)) return Node{"reshape", {{"shape", shape_of(g, output)}}, {source}, output, origin};
  return Node{"transpose", {{"perm", perm}}, {source}, output, origin};
}

}  // namespace

int move_transposes_past_unit_reshapes(Graph &graph) {
  int moved = 0;
  Uses u(graph);
  for (size_t t = 0; t < graph.nodes.size(); ++t) {
    if (graph.nodes[t].op != "transpose") continue;
    const Node transpose = graph.nodes[t];
    std::vector<int64_t> perm = transpose.attrs["perm"].get<std::vector<int64_t>>();
    ValueId y = transpose.output;
    const Node *reader = sole_reader(graph, u, y);
    std::optional<size_t> producer = graph.producer(transpose.inputs[0]);

    // reshape(transpose(x)) read by a matrix product -> transpose(reshape(x)): the
    // product then reads the transpose and takes it into its own indexing.
    if (reader && reader->op == "reshape" &&
        only_unit_axes_change(shape_of(graph, y), shape_of(graph, reader->output))) {
      const Node *product = sole_reader(graph, u, reader->output);
      if (product && (product->op == "matmul" || product->op == "batch_matmul")) {
        size_t r = static_cast<size_t>(reader - graph.nodes.data());
        ValueId x = transpose.inputs[0], z = reader->output;
        std::vector<int64_t> xs = shape_of(graph, x), zs = shape_of(graph, z);
        // x' holds x's axes of extent above 1 in order, then the unit axes z needs.
        std::vector<size_t> x_axes = non_unit_axes(xs), y_axes = non_unit_axes(shape_of(graph, y)),
                            z_axes = non_unit_axes(zs);
        std::vector<int64_t> x_squeezed;
        for (size_t a : x_axes) x_squeezed.push_back(xs[a]);
        std::vector<int64_t> to_z(zs.size(), -1);
        for (size_t i = 0; i < z_axes.size(); ++i) {
          size_t from_x = static_cast<size_t>(perm[y_axes[i]]);
          to_z[z_axes[i]] = std::find(x_axes.begin(), x_axes.end(), from_x) - x_axes.begin();
        }
        int64_t next_unit = static_cast<int64_t>(x_squeezed.size());
        for (int64_t &q : to_z)
          if (q < 0) {
            q = next_unit++;
            x_squeezed.push_back(1);
          }
        Value squeezed = graph.values[static_cast<size_t>(x)];
        squeezed.type.shape = x_squeezed;
        squeezed.name += "_squeezed";
        ValueId xq = graph.add_value(std::move(squeezed));
        graph.nodes[t] = Node{"reshape", {{"shape", x_squeezed}}, {x}, xq, transpose.source};
        graph.nodes[r] = transpose_or_reshape(graph, xq, to_z, z, transpose.source);
        ++moved;
        u = Uses(graph);
        continue;
      }
    }

    // transpose(reshape(x)) of a computed x -> reshape(transpose(x)): the transpose then
    // reads what computes x and joins its subgraph as the way it stores.
    if (!producer || graph.nodes[*producer].op != "reshape" || !u.single_use(transpose.inputs[0])) continue;
    const Node &reshape = graph.nodes[*producer];
    ValueId x = reshape.inputs[0];
    std::optional<size_t> computes_x = graph.producer(x);
    if (!computes_x || op_pattern(graph.nodes[*computes_x].op) == ops::OpPattern::kLayout ||
        op_pattern(graph.nodes[*computes_x].op) == ops::OpPattern::kOpaque)
      continue;
    std::vector<int64_t> xs = shape_of(graph, x), ys = shape_of(graph, reshape.output), zs = shape_of(graph, y);
    if (!only_unit_axes_change(xs, ys)) continue;
    std::vector<size_t> x_axes = non_unit_axes(xs), y_axes = non_unit_axes(ys), z_axes = non_unit_axes(zs);
    // w = x with its axes in z's order (z's axes of extent above 1 first, x's unit axes after).
    std::vector<int64_t> to_w;
    for (size_t d : z_axes) {
      size_t i = std::find(y_axes.begin(), y_axes.end(), static_cast<size_t>(perm[d])) - y_axes.begin();
      to_w.push_back(static_cast<int64_t>(x_axes[i]));
    }
    for (size_t a = 0; a < xs.size(); ++a)
      if (xs[a] == 1) to_w.push_back(static_cast<int64_t>(a));
    Value permuted_value = graph.values[static_cast<size_t>(x)];
    permuted_value.type.shape = permuted(xs, to_w);
    permuted_value.name += "_transposed";
    ValueId w = graph.add_value(std::move(permuted_value));
    size_t r = *producer;
    graph.nodes[r] = transpose_or_reshape(graph, x, to_w, w, transpose.source);
    graph.nodes[t] = Node{"reshape", {{"shape", zs}}, {w}, y, transpose.source};
    ++moved;
    u = Uses(graph);
  }
  return moved;
}

}  // namespace kiln::frontend
