#include "frontend/fusion.h"
#include "frontend/passes.h"
#include "frontend/passes/pass_util.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace kiln::frontend {

using namespace detail;

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
      if ((op_pattern(n.op) != ops::OpPattern::kElementwise && !concat) || out_shape.size() != 4) continue;
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

}  // namespace kiln::frontend
