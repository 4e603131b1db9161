// Graph passes over the imported graph, each a function from graph to graph.
#pragma once

#include "frontend/graph.h"

namespace kiln::frontend {

/// Removes nodes whose result no graph output depends on. Returns how many.
int eliminate_dead_nodes(Graph &graph);

}  // namespace kiln::frontend
