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

}  // namespace kiln::frontend
