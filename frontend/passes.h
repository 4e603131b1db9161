// Graph passes over the imported graph, each a function that rewrites the graph in
// place and says how much it changed, each in its own file under frontend/passes/.
// `default_passes()` lists the ones every model gets, in order; the layout and
// Winograd rewrites are chosen by the pipeline (frontend/pipeline.h).
#pragma once

#include <vector>

#include "frontend/graph.h"

namespace kiln::frontend {

/// Removes nodes whose result no graph output depends on. Returns how many.
int eliminate_dead_nodes(Graph &graph);

/// Merges nodes that apply the same operator with the same attributes to the same
/// inputs (the three reshapes of one activation feeding Q, K and V). Returns how many
/// nodes were removed.
int eliminate_common_subexpressions(Graph &graph);

/// Recognizes the exact GELU that exporters spell x * 0.5 * (1 + erf(x / sqrt(2)))
/// (in any operand order) and replaces it with one `gelu`. Returns how many.
int rewrite_gelu(Graph &graph);

/// Recognizes opset-13 LayerNorm (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt,
/// Div, Mul gamma, Add beta over the last axis) and replaces it with `layer_norm`.
/// Returns how many.
int rewrite_layer_norm(Graph &graph);

/// Moves a reshape below a unary element-wise operation, and below a binary one whose
/// other operand is a single value (a scale), a tensor varying along the last axis
/// alone (kept by the reshape: a bias, an attention mask), or a computed tensor of the
/// reshaped shape (a residual); a computed operand is then read through a reshape of
/// its own, a view. add(reshape(y), bias) becomes
/// reshape(add(y, bias)), so a scale, a mask, a bias, a residual and an activation join their
/// matrix product's subgraph. Returns how many.
int sink_reshapes_below_bias(Graph &graph);

/// Swaps a transpose with a reshape beside it that only adds or drops axes of extent 1
/// (the exporters' 4-d attention tensors viewed as 3-d batches), so the transpose sits
/// next to what fusion folds it into: reshape(transpose(x)) read by a matrix product
/// becomes transpose(reshape(x)), and transpose(reshape(x)) of a computed x becomes
/// reshape(transpose(x)). Returns how many were moved.
int move_transposes_past_unit_reshapes(Graph &graph);

/// A reshape (or flatten) of a reshape reads the inner one's input; a reshape to its
/// input's own shape disappears. Returns how many were merged or removed.
int merge_reshapes(Graph &graph);

/// Folds a constant per-output-channel multiply, divide, add or subtract (what
/// BatchNormalization imports as: x * s + t) into the conv2d or dense that produces its
/// operand: the weights are scaled and the bias shifted, so an inference-mode batch norm
/// costs nothing at run time. Only float32, and only when the product has no other
/// reader. Returns how many nodes were folded away.
int fold_channel_affine(Graph &graph);

/// Runs every float32 NCHW convolution with a constant weight, and every NCHW pooling
/// operator, in NHWC: the convolution's weight becomes an HWIO constant, each operator
/// sits between a transpose to NHWC and one back, the transposes back sink below the
/// element-wise operators and concats that read them (their constants reordered alike,
/// a concat's axis renumbered), and a
/// transpose meeting its inverse disappears. A chain of convolutions then runs in NHWC
/// from the first transpose of the input to the last one back, output channels innermost:
/// contiguous vectors of channels for the kernels, and no padded NCHW rows of 7 or 14.
/// Returns how many operators changed layout.
int convert_images_to_nhwc(Graph &graph);

/// Rewrites a 3x3, stride-1, undilated, ungrouped NHWC conv2d with a constant float32
/// weight as Winograd F(m x m, 3 x 3) (ops/winograd.cc): winograd_input_transform,
/// batch_matmul with the weight transformed here (G g Gt, [(m+2)^2, C, O], computed in
/// double), winograd_output_transform with the bias. Only where F(2x2) takes at most half
/// the direct convolution's multiply-adds (the tiles of a small or odd image waste too
/// much) and both channel counts are at least 8; F(4x4) where it takes at most 70% of
/// F(2x2)'s (large images). Returns how many.
int rewrite_winograd_convolutions(Graph &graph);

/// A graph pass: its name (for logs and tests) and the function that runs it.
struct GraphPass {
  const char *name;
  int (*run)(Graph &graph);
};

/// CSE, batch-norm folding, the pattern rewrites, reshape sinking, transposes moved past
/// unit reshapes, reshape merging, then
/// dead-node elimination: what every imported model gets, in this order.
const std::vector<GraphPass> &default_passes();

/// Runs default_passes() in order.
void run_default_passes(Graph &graph);

}  // namespace kiln::frontend
