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

int sink_reshapes_below_bias(Graph &graph) {
  static const std::set<std::string> elementwise_binary = {"add", "sub", "mul", "div", "maximum", "minimum"};
  int moved = 0;
  Uses u(graph);
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node &op = graph.nodes[i];
    bool unary = op.inputs.size() == 1 && op_pattern(op.op) == ops::OpPattern::kElementwise;
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

}  // namespace kiln::frontend
