#include "frontend/passes.h"
#include "frontend/passes/pass_util.h"
#include "ops/winograd.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace kiln::frontend {

using namespace detail;

namespace {

// How a Winograd convolution tiles its output: m x m blocks, tiles_h x tiles_w of them.
struct WinogradTiling {
  int64_t output_tile = 2;
  int64_t tiles_h = 0, tiles_w = 0;
};

// The Winograd form of an NHWC convolution, when it pays (passes.h).
std::optional<WinogradTiling> winograd_tiling(const Graph &g, const Node &n) {
  if (n.op != "conv2d" || n.attrs.value("layout", std::string()) != "NHWC") return std::nullopt;
  if (n.attrs.value("strides", std::vector<int64_t>{}) != std::vector<int64_t>{1, 1} ||
      n.attrs.value("dilations", std::vector<int64_t>{}) != std::vector<int64_t>{1, 1} ||
      n.attrs.value("groups", int64_t{0}) != 1)
    return std::nullopt;
  const Value &data = g.values[static_cast<size_t>(n.inputs[0])];
  const Value &weight = g.values[static_cast<size_t>(n.inputs[1])];
  const std::vector<int64_t> &ws = weight.type.shape;
  if (!weight.is_constant() || weight.type.dtype != ir::DType::kFloat32 || data.type.dtype != ir::DType::kFloat32 ||
      ws.size() != 4 || ws[0] != 3 || ws[1] != 3 || ws[2] < 8 || ws[3] < 8)
    return std::nullopt;
  const std::vector<int64_t> &out = g.values[static_cast<size_t>(n.output)].type.shape;
  // Multiply-adds per input and output channel pair: 9 per output directly, (m+2)^2 per
  // m x m tile.
  auto tiling = [&](int64_t m) { return WinogradTiling{m, (out[1] + m - 1) / m, (out[2] + m - 1) / m}; };
  auto products = [](const WinogradTiling &t) {
    const int64_t a = t.output_tile + 2;
    return a * a * t.tiles_h * t.tiles_w;
  };
  const WinogradTiling f2 = tiling(2), f4 = tiling(4);
  if (2 * products(f2) > 9 * out[1] * out[2]) return std::nullopt;
  if (10 * products(f4) <= 7 * products(f2)) return f4;
  return f2;
}

// U[a*A+b, c, o] = (G g[.,.,c,o] Gt)[a, b] for an HWIO weight g (A = m + 2), in double.
ValueId add_winograd_weight(Graph &g, ValueId weight, const ops::WinogradMatrices &w) {
  Value copy = g.values[static_cast<size_t>(weight)];
  const ir::HostTensor &filter = *copy.constant;
  const int64_t channels = filter.shape()[2], outs = filter.shape()[3], a = w.input_tile;
  ir::HostTensor u(ir::DType::kFloat32, {a * a, channels, outs});
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t o = 0; o < outs; ++o) {
      auto at = [&](int64_t i, int64_t j) { return filter.get(((i * 3 + j) * channels + c) * outs + o); };
      for (int64_t r = 0; r < a; ++r)
        for (int64_t s = 0; s < a; ++s) {
          double sum = 0;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j)
              sum += w.g[static_cast<size_t>(r)][static_cast<size_t>(i)] * at(i, j) *
                     w.g[static_cast<size_t>(s)][static_cast<size_t>(j)];
          u.set(((r * a + s) * channels + c) * outs + o, sum);
        }
    }
  copy.type.shape = u.shape();
  copy.constant = std::make_shared<const ir::HostTensor>(std::move(u));
  copy.name += "_winograd";
  return g.add_value(std::move(copy));
}

}  // namespace

int rewrite_winograd_convolutions(Graph &graph) {
  int rewritten = 0;
  std::vector<Node> nodes;
  for (Node &n : graph.nodes) {
    std::optional<WinogradTiling> tiling = winograd_tiling(graph, n);
    if (!tiling) {
      nodes.push_back(std::move(n));
      continue;
    }
    const ops::WinogradMatrices &w = *ops::winograd_matrices(tiling->output_tile);
    const std::vector<int64_t> out = graph.values[static_cast<size_t>(n.output)].type.shape;
    const int64_t channels = graph.values[static_cast<size_t>(n.inputs[0])].type.shape[3];
    const int64_t tile_count = out[0] * tiling->tiles_h * tiling->tiles_w;
    auto add_products = [&](int64_t columns, const char *suffix) {
      Value v = graph.values[static_cast<size_t>(n.output)];
      v.type.shape = {w.input_tile * w.input_tile, tile_count, columns};
      v.name += suffix;
      return graph.add_value(std::move(v));
    };
    Node input{"winograd_input_transform",
               {{"output_tile", w.output_tile}, {"pads", n.attrs["pads"]}},
               {n.inputs[0]},
               add_products(channels, "_winograd_in"),
               n.source};
    Node product{"batch_matmul",
                 {{"transpose_a", false}, {"transpose_b", false}},
                 {input.output, add_winograd_weight(graph, n.inputs[1], w)},
                 add_products(out[3], "_winograd_products"),
                 n.source};
    std::vector<ValueId> output_inputs = {product.output};
    if (n.inputs.size() > 2) output_inputs.push_back(n.inputs[2]);
    Node output{"winograd_output_transform",
                {{"height", out[1]}, {"output_tile", w.output_tile}, {"width", out[2]}},
                output_inputs,
                n.output,
                n.source};
    nodes.push_back(std::move(input));
    nodes.push_back(std::move(product));
    nodes.push_back(std::move(output));
    ++rewritten;
  }
  graph.nodes = std::move(nodes);
  if (rewritten > 0) eliminate_dead_nodes(graph);
  return rewritten;
}

}  // namespace kiln::frontend
