// The reference evaluation of a graph: every node run by the IR interpreter. Slow, and
// the oracle that compiled models are checked against.
#pragma once

#include <vector>

#include "frontend/fusion.h"
#include "frontend/graph.h"

namespace kiln::frontend {

/// Runs `graph` on `inputs` (one per Graph::inputs, in order; shapes and dtypes
/// checked) and returns one tensor per Graph::outputs.
std::vector<ir::HostTensor> evaluate_reference(const Graph &graph, const std::vector<ir::HostTensor> &inputs);

/// The same, one fused subgraph (its workload) at a time: what a compiled model runs.
std::vector<ir::HostTensor> evaluate_subgraphs(const Graph &graph, const std::vector<Subgraph> &subgraphs,
                                               const std::vector<ir::HostTensor> &inputs);

}  // namespace kiln::frontend
