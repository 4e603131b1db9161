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
    // A mask's select (dynamic shapes): where(valid, y, fill) commutes like a binary op,
    // its condition and fill being the other operands.
    bool select = op.op == "where" && op.inputs.size() == 3;
    if (!elementwise_binary.count(op.op) && !unary && !select) continue;
    for (int side = select ? 1 : 0; side < static_cast<int>(op.inputs.size()); ++side) {
      ValueId reshaped = op.inputs[static_cast<size_t>(side)];
      std::optional<size_t> r = graph.producer(reshaped);
      if (!r || graph.nodes[*r].op != "reshape" || !u.single_use(reshaped)) continue;
      ValueId source = graph.nodes[*r].inputs[0];
      const std::vector<int64_t> &from = graph.values[static_cast<size_t>(source)].type.shape;
      const std::vector<int64_t> &to = graph.values[static_cast<size_t>(reshaped)].type.shape;
      const std::vector<int64_t> &out = graph.values[static_cast<size_t>(op.output)].type.shape;
      if (out != to) continue;
      // A unary operation commutes with any reshape, and so does one whose other
      // operands are each a single value (a scale, a fill), a constant varying along the
      // last axis only that the reshape keeps (a bias), or a tensor of the reshaped shape
      // (a residual: it is read through a reshape to y's shape, a view). The operation's
      // result must have the reshaped shape (the operand does not grow it). (A computed
      // mask varying along the last axis is read through a view too, of rank 1 where its
      // own rank would grow y's.)
      std::vector<std::pair<size_t, std::vector<int64_t>>> views;  // operand, the shape it is read in
      bool commutes = true;
      for (size_t k = 0; k < op.inputs.size() && commutes; ++k) {
        if (static_cast<int>(k) == side) continue;
        ValueId other = op.inputs[k];
        const Value &c = graph.values[static_cast<size_t>(other)];
        auto ones = [](auto begin, auto end) { return std::all_of(begin, end, [](int64_t d) { return d == 1; }); };
        bool scalar = c.type.shape.size() <= from.size() && ones(c.type.shape.begin(), c.type.shape.end());
        bool last_axis_only = !c.type.shape.empty() && !from.empty() && !to.empty() && from.back() == to.back() &&
                              (c.type.shape.size() <= from.size() || !c.is_constant()) &&
                              ones(c.type.shape.begin(), c.type.shape.end() - 1);
        bool same_shape = !c.is_constant() && c.type.shape == to && other != reshaped;
        if (!(scalar || last_axis_only || same_shape)) {
          commutes = false;
        } else if (same_shape && !scalar) {
          views.emplace_back(k, from);
        } else if (!scalar && c.type.shape.size() > from.size()) {
          views.emplace_back(k, std::vector<int64_t>{c.type.shape.back()});
        }
      }
      if (!commutes) continue;
      // op(reshape(y), c) -> reshape(op(y, c)): the operation takes y's shape and the
      // reshape moves to its result.
      ValueId result = op.output;
      Value narrow = graph.values[static_cast<size_t>(result)];
      narrow.type.shape = from;
      narrow.name += "_unreshaped";
      ValueId inner = graph.add_value(std::move(narrow));
      for (const auto &[k, view_shape] : views) {
        // The other operand (a residual, a mask) as a view of the shape y broadcasts with.
        ValueId operand = graph.nodes[i].inputs[k];
        Value view = graph.values[static_cast<size_t>(operand)];
        view.type.shape = view_shape;
        view.name += "_reshaped";
        ValueId viewed = graph.add_value(std::move(view));
        graph.nodes.insert(graph.nodes.begin() + static_cast<long>(i),
                           Node{"reshape", {{"shape", view_shape}}, {operand}, viewed, graph.nodes[i].source});
        ++i;
        graph.nodes[i].inputs[k] = viewed;
      }
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
