// Task extraction: the workloads a model's graph needs tuned, one per distinct workload
// key, with how often the model runs each (its weight) and its FLOPs.
#pragma once

#include <string>
#include <vector>

#include "frontend/fusion.h"
#include "frontend/graph.h"
#include "ops/workload.h"

namespace kiln::frontend {

struct Task {
  ops::Workload workload;
  std::string key_hash;
  int weight = 0;                 ///< occurrences in the graph
  double flops = 0;               ///< of one occurrence
  std::vector<size_t> subgraphs;  ///< indices of the subgraphs it tunes, in model order
};

/// The workload of one node: its operator on its inputs' types.
ops::Workload node_workload(const Graph &graph, const Node &node);

/// One task per distinct workload key among `subgraphs` (see fuse()), in model order.
std::vector<Task> extract_tasks(const std::vector<Subgraph> &subgraphs);

}  // namespace kiln::frontend
