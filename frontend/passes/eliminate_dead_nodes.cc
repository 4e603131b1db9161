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

}  // namespace kiln::frontend
