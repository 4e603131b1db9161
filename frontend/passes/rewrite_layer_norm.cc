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

}  // namespace kiln::frontend
