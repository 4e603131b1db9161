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

}  // namespace kiln::frontend
