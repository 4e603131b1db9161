#include "frontend/passes.h"

namespace kiln::frontend {

const std::vector<GraphPass> &default_passes() {
  // Batch norms fold before the patterns are matched (a folded affine is no longer a
  // node to match); reshapes sink before they merge, and dead nodes go last.
  static const std::vector<GraphPass> passes = {
      {"eliminate_common_subexpressions", eliminate_common_subexpressions},
      {"fold_channel_affine", fold_channel_affine},
      {"rewrite_layer_norm", rewrite_layer_norm},
      {"rewrite_gelu", rewrite_gelu},
      {"sink_reshapes_below_bias", sink_reshapes_below_bias},
      {"move_transposes_past_unit_reshapes", move_transposes_past_unit_reshapes},
      {"merge_reshapes", merge_reshapes},
      {"eliminate_dead_nodes", eliminate_dead_nodes},
  };
  return passes;
}

void run_default_passes(Graph &graph) {
  for (const GraphPass &pass : default_passes()) pass.run(graph);
}

}  // namespace kiln::frontend
