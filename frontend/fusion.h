// Fusion: the graph's nodes grouped into subgraphs, each compiled and tuned as one
// workload. As TVM's fusion levels, from each operator's pattern in the registry
// (ops::OpDef::pattern): an operator with data reuse (convolution, matrix products,
// pooling, reductions, softmax, layer norm) or an element-wise operator starts a
// group; element-wise and broadcast consumers join their producer's group while the
// producer has no other reader; a transpose that keeps the innermost axis joins the
// group that computes its input (stored transposed) or, failing that, the matrix
// product that alone reads it (loaded through the permutation); other layout operators (reshape, flatten, concat) and
// opaque ones are groups of their own.
#pragma once

#include <string>
#include <vector>

#include "frontend/graph.h"
#include "ops/registry.h"
#include "ops/workload.h"

namespace kiln::frontend {

/// A group takes at most this many nodes (TVM's fusion has the same bound, max_depth):
/// scheduling inlines a group's element-wise nodes one by one into one expression, at a
/// cost that grows with the square of the group's length, so a chain of thousands of
/// element-wise nodes is cut into groups of this many, and compiles in time linear in
/// its length.
inline constexpr int kMaxFusedNodes = 256;

/// The registry's fusion pattern of operator `op` (kOpaque for an unknown name).
ops::OpPattern op_pattern(const std::string &op);

struct Subgraph {
  std::vector<size_t> nodes;    ///< indices into Graph::nodes, producers first
  std::vector<ValueId> inputs;  ///< values read from outside: activations and constants
  ValueId output = -1;          ///< the one value leaving the group
  ops::Workload workload;       ///< inputs in `inputs` order, ops in `nodes` order
};

/// Groups every node of `graph` (in topological order) into subgraphs. With
/// `mark_constants`, workload inputs that are the graph's constants (weights) are marked
/// constant, so tuned programs may read them packed ahead of time (layout rewrite).
std::vector<Subgraph> fuse(const Graph &graph, bool mark_constants = true);

}  // namespace kiln::frontend
