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
    // * x and * 0.5, in any order: x * (1 + erf) then * 0.5, (x * 0.5) * (1 + erf), or
    // x * (0.5 * (1 + erf)) (torch.onnx.export's torch.export-based exporter)
    const Node *times = sole_reader(graph, u, plus->output);
    if (!times || times->op != "mul") continue;
    std::optional<ValueId> factor = other_operand(*times, plus->output);
    ValueId result;
    std::vector<size_t> absorbed;
    if (factor && near(scalar_constant(graph, *factor), 0.5)) {
      const Node *by_x = sole_reader(graph, u, times->output);
      if (!by_x || by_x->op != "mul" || other_operand(*by_x, times->output) != std::optional<ValueId>(x)) continue;
      result = by_x->output;
    } else if (factor && *factor == x) {
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

}  // namespace kiln::frontend
