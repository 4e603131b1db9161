#include "frontend/tasks.h"

#include <map>

#include "te/flops.h"

namespace kiln::frontend {

ops::Workload node_workload(const Graph &graph, const Node &node) {
  ops::Workload w;
  ops::OpCall call{node.op, node.attrs, {}};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    w.inputs.push_back(graph.values[static_cast<size_t>(node.inputs[i])].type);
    call.args.push_back("in" + std::to_string(i));
  }
  w.ops.push_back(std::move(call));
  w.outputs = {"op0"};
  return w;
}

std::vector<Task> extract_tasks(const std::vector<Subgraph> &subgraphs) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> by_key;
  for (size_t i = 0; i < subgraphs.size(); ++i) {
    const ops::Workload &w = subgraphs[i].workload;
    std::string key = w.key_hash();
    auto [it, fresh] = by_key.emplace(key, tasks.size());
    if (fresh) {
      Task t;
      t.flops = te::estimate_flops(w.build_dag());
      t.workload = w;
      t.key_hash = key;
      tasks.push_back(std::move(t));
    }
    Task &t = tasks[it->second];
    ++t.weight;
    t.subgraphs.push_back(i);
  }
  return tasks;
}

}  // namespace kiln::frontend
