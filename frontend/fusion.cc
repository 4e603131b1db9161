#include "frontend/fusion.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

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

// A transpose is a copy of its tensor when it runs on its own. Two places take it for
// free instead: the group that computes its input, whose program then stores each value
// at its transposed position (scheduling fuses it into the write-back like any
// element-wise epilogue), and a matrix product that reads it, whose program then loads
// the operand through the permuted index (scheduling inlines it). Only a transpose that
// keeps the innermost axis innermost: the vectors of the loads and stores stay
// contiguous. One that moves it (attention's K into Kᵀ) made the product read a column
// per vector, and the fused scores' product tuned to 0.21 ms where the copy and the
// product apart took 0.04 + 0.07 ms. Convolutions do not take a transposed input: they
// read each input element many times, and a transpose fused ahead of resnet18's stem
// convolution tuned 10% slower than the two apart.
bool is_foldable_transpose(const Node &n) {
  if (n.op != "transpose") return false;
  std::vector<int64_t> perm = n.attrs["perm"].get<std::vector<int64_t>>();
  return !perm.empty() && perm.back() == static_cast<int64_t>(perm.size()) - 1;
}
bool reads_transposed_operands(const Node &n) { return n.op == "matmul" || n.op == "batch_matmul"; }

}  // namespace

std::vector<Subgraph> fuse(const Graph &graph, bool mark_constants) {
  std::vector<int> readers(graph.values.size(), 0);
  for (const Node &n : graph.nodes)
    for (ValueId in : n.inputs) ++readers[static_cast<size_t>(in)];
  for (ValueId v : graph.outputs) ++readers[static_cast<size_t>(v)];

  std::vector<Subgraph> groups;
  std::vector<bool> absorbed;                 // a group merged into a later one
  std::map<ValueId, size_t> group_of_output;  // the open group whose output a value is
  // The open group whose output `in` is, when that value has a single reader.
  auto sole_reader_group = [&](ValueId in) -> std::optional<size_t> {
    auto it = group_of_output.find(in);
    if (it == group_of_output.end() || readers[static_cast<size_t>(in)] != 1) return std::nullopt;
    return it->second;
  };
  auto computes = [&](const Subgraph &g) {
    ops::OpPattern producer = op_pattern(graph.nodes[g.nodes.back()].op);
    return producer != ops::OpPattern::kLayout && producer != ops::OpPattern::kOpaque;
  };
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node &n = graph.nodes[i];
    std::optional<size_t> join;
    if (op_pattern(n.op) == ops::OpPattern::kElementwise) {
      // Join the group of the one computed operand whose value only this node reads,
      // when the result has that group's shape (a broadcast that grows it does not fuse).
      for (ValueId in : n.inputs) {
        std::optional<size_t> g = sole_reader_group(in);
        // Consumers join computations, never moves of elements or opaque operators.
        if (!g || !computes(groups[*g]) || groups[*g].nodes.size() >= static_cast<size_t>(kMaxFusedNodes)) continue;
        if (graph.values[static_cast<size_t>(in)].type.shape != graph.values[static_cast<size_t>(n.output)].type.shape)
          continue;
        join = g;
        break;
      }
    } else if (is_foldable_transpose(n)) {
      std::optional<size_t> g = sole_reader_group(n.inputs[0]);
      if (g && computes(groups[*g]) && groups[*g].nodes.size() < static_cast<size_t>(kMaxFusedNodes)) join = g;
    }
    if (join) {
      Subgraph &g = groups[*join];
      group_of_output.erase(g.output);
      g.nodes.push_back(i);
      g.output = n.output;
    } else {
      Subgraph fresh{{}, {}, n.output, {}};
      if (reads_transposed_operands(n)) {
        for (ValueId in : n.inputs) {
          std::optional<size_t> g = sole_reader_group(in);
          if (!g || groups[*g].nodes.size() != 1 || !is_foldable_transpose(graph.nodes[groups[*g].nodes[0]])) continue;
          fresh.nodes.push_back(groups[*g].nodes[0]);
          absorbed[*g] = true;
          group_of_output.erase(in);
        }
        std::sort(fresh.nodes.begin(), fresh.nodes.end());
      }
      fresh.nodes.push_back(i);
      groups.push_back(std::move(fresh));
      absorbed.push_back(false);
    }
    group_of_output[n.output] = join ? *join : groups.size() - 1;
  }
  std::vector<Subgraph> kept;
  for (size_t k = 0; k < groups.size(); ++k)
    if (!absorbed[k]) kept.push_back(std::move(groups[k]));
  groups = std::move(kept);
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
