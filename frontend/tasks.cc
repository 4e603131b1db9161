#include "frontend/tasks.h"

#include <map>

#include "ir/flops.h"

namespace kiln::frontend {

ir::Workload node_workload(const Graph &graph, const Node &node) {
  ir::Workload w;
  ir::OpCall call{node.op, node.attrs, {}};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    w.inputs.push_back(graph.values[static_cast<size_t>(node.inputs[i])].type);
    call.args.push_back("in" + std::to_string(i));
  }
  w.ops.push_back(std::move(call));
  w.outputs = {"op0"};
  return w;
}

std::vector<Task> extract_tasks(const Graph &graph) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> by_key;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    ir::Workload w = node_workload(graph, graph.nodes[i]);
    std::string key = w.key_hash();
    auto [it, fresh] = by_key.emplace(key, tasks.size());
    if (fresh) {
      Task t;
      t.flops = ir::estimate_flops(w.build_dag());
      t.workload = std::move(w);
      t.key_hash = key;
      tasks.push_back(std::move(t));
    }
    Task &t = tasks[it->second];
    ++t.weight;
    t.nodes.push_back(i);
  }
  return tasks;
}

}  // namespace kiln::frontend
