#include "frontend/fusion.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace kiln::frontend {

ops::OpPattern op_pattern(const std::string &op) {
  const ops::OpDef *def = ops::find_op(op);
  if (!def || def->pattern == ops::OpPattern::kUnspecified) return ops::OpPattern::kOpaque;
  return def->pattern;
}

namespace {

ops::Workload workload_of(const Graph &g, const Subgraph &s, bool mark_constants) {
  ops::Workload w;
  std::map<ValueId, std::string> names;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    names[s.inputs[i]] = "in" + std::to_string(i);
    const Value &v = g.values[static_cast<size_t>(s.inputs[i])];
    w.inputs.push_back(v.type);
    w.inputs.back().constant = mark_constants && v.is_constant();
  }
  for (size_t k = 0; k < s.nodes.size(); ++k) {
    const Node &n = g.nodes[s.nodes[k]];
    ops::OpCall call{n.op, n.attrs, {}};
    for (ValueId in : n.inputs) call.args.push_back(names.at(in));
    w.ops.push_back(std::move(call));
    names[n.output] = "op" + std::to_string(k);
  }
  w.outputs = {names.at(s.output)};
  return w;
}

}  // namespace

std::vector<Subgraph> fuse(const Graph &graph, bool mark_constants) {
  std::vector<int> readers(graph.values.size(), 0);
  for (const Node &n : graph.nodes)
    for (ValueId in : n.inputs) ++readers[static_cast<size_t>(in)];
  for (ValueId v : graph.outputs) ++readers[static_cast<size_t>(v)];

  std::vector<Subgraph> groups;
  std::map<ValueId, size_t> group_of_output;  // the open group whose output a value is
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node &n = graph.nodes[i];
    std::optional<size_t> join;
    if (op_pattern(n.op) == ops::OpPattern::kElementwise) {
      // Join the group of the one computed operand whose value only this node reads,
      // when the result has that group's shape (a broadcast that grows it does not fuse).
      for (ValueId in : n.inputs) {
        auto it = group_of_output.find(in);
        if (it == group_of_output.end() || readers[static_cast<size_t>(in)] != 1) continue;
        const Subgraph &g = groups[it->second];
        const Node &last = graph.nodes[g.nodes.back()];
        // Consumers join computations, never moves of elements or opaque operators.
        ops::OpPattern producer = op_pattern(last.op);
        if (producer == ops::OpPattern::kLayout || producer == ops::OpPattern::kOpaque) continue;
        if (g.nodes.size() >= static_cast<size_t>(kMaxFusedNodes)) continue;
        if (graph.values[static_cast<size_t>(in)].type.shape != graph.values[static_cast<size_t>(n.output)].type.shape)
          continue;
        join = it->second;
        break;
      }
    }
    if (join) {
      Subgraph &g = groups[*join];
      group_of_output.erase(g.output);
      g.nodes.push_back(i);
      g.output = n.output;
    } else {
      groups.push_back(Subgraph{{i}, {}, n.output, {}});
    }
    group_of_output[n.output] = join ? *join : groups.size() - 1;
  }
  for (Subgraph &s : groups) {
    std::set<ValueId> produced;
    for (size_t k : s.nodes) produced.insert(graph.nodes[k].output);
    for (size_t k : s.nodes)
      for (ValueId in : graph.nodes[k].inputs)
        if (!produced.count(in) && std::find(s.inputs.begin(), s.inputs.end(), in) == s.inputs.end())
          s.inputs.push_back(in);
    s.workload = workload_of(graph, s, mark_constants);
  }
  // A group runs when its last node would: every value it reads is ready by then.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Subgraph &a, const Subgraph &b) { return a.nodes.back() < b.nodes.back(); });
  return groups;
}

}  // namespace kiln::frontend
