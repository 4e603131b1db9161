// Winograd F(m x m, 3 x 3), m = 2 or 4: a 3x3 stride-1 convolution as a batched matrix
// product between two cheap transforms (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks"). Each m x m block of outputs reads an (m+2) x (m+2)
// tile of the input:
//
//   Y = At [ (G g Gt) . (Bt d B) ] A      (. elementwise over the tile's positions)
//
// Summed over input channels, the (m+2)^2 elementwise products become as many matrix
// products [tiles x C] x [C x O]: (m+2)^2 multiply-adds per m^2 outputs and channel pair
// (16 per 4 for m = 2, 36 per 16 for m = 4) where the direct convolution spends 9 per
// output. The weight transform U = G g Gt is done once, at import (frontend/passes.h,
// rewrite_winograd_convolutions); these two operators are the input transform
// V = Bt d B and the output transform Y = At M A. Their matrices hold small integers, so
// each row is a few additions, written out from the table as a select over the tile
// position instead of read from memory: the search's unroll_table_axes rule
// (search/rules/) unrolls the position, and every select folds away.
#include "ops/winograd.h"

#include <string>

#include "ops/op_util.h"

namespace kiln::ops {

const WinogradMatrices *winograd_matrices(int64_t output_tile) {
  static const WinogradMatrices f2{2,
                                   4,
                                   {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                                   {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                                   {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  // Interpolation points 0, 1, -1, 2, -2 and infinity.
  static const WinogradMatrices f4{
      4,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  if (output_tile == 2) return &f2;
  if (output_tile == 4) return &f4;
  return nullptr;
}

namespace detail {
namespace {

Expr equals(const Expr &a, int64_t b) { return ir::make_cmp(ir::ExprKind::kEQ, a, Expr(b)); }

// Row k of `matrix` applied to `x`: a select over k of each row's sum, coefficients of
// +-1 as additions and subtractions, the positive terms first.
Expr matrix_row(const std::vector<std::vector<double>> &matrix, const Expr &k, const std::vector<Expr> &x) {
  const DType dtype = x.front().dtype();
  auto row_sum = [&](const std::vector<double> &row) {
    Expr sum;
    for (bool positive : {true, false})
      for (size_t j = 0; j < row.size(); ++j) {
        if (row[j] == 0 || (row[j] > 0) != positive) continue;
        const double magnitude = positive ? row[j] : -row[j];
        Expr term = magnitude == 1 ? x[j] : ir::make_const(dtype, magnitude) * x[j];
        if (!sum.defined())
          sum = positive ? term : ir::make_const(dtype, 0) - term;
        else
          sum = positive ? sum + term : sum - term;
      }
    return sum;
  };
  Expr out = row_sum(matrix.back());
  for (size_t r = matrix.size() - 1; r-- > 0;)
    out = ir::make_select(equals(k, static_cast<int64_t>(r)), row_sum(matrix[r]), out);
  return out;
}

const WinogradMatrices &matrices_of(const char *op, const json &attrs) {
  const int64_t m = attr_int(attrs, "output_tile");
  const WinogradMatrices *w = winograd_matrices(m);
  if (!w) fail(op, "output_tile must be 2 or 4 (F(2x2,3x3) or F(4x4,3x3)), got " + std::to_string(m));
  return *w;
}

// Both sides of one transform: matrix applied to the tile's rows, then to the result's
// columns, at tile position (row, col); element(i, j) is the tile's element.
template <typename Element>
Expr transform_tile(const std::vector<std::vector<double>> &matrix, const Expr &row, const Expr &col,
                    const Element &element) {
  std::vector<Expr> across;
  for (size_t i = 0; i < matrix.front().size(); ++i) {
    std::vector<Expr> tile_row;
    for (size_t j = 0; j < matrix.front().size(); ++j)
      tile_row.push_back(element(static_cast<int64_t>(i), static_cast<int64_t>(j)));
    across.push_back(matrix_row(matrix, col, tile_row));
  }
  return matrix_row(matrix, row, across);
}

int64_t tiles(int64_t extent, int64_t m) { return (extent + m - 1) / m; }

te::Tensor winograd_input_transform(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "winograd_input_transform";
  const te::Tensor &data = in[0];
  const WinogradMatrices &w = matrices_of(op, attrs);
  const int64_t m = w.output_tile, a = w.input_tile;
  require_rank(op, data, 4, "data (NHWC)");
  require_float(op, data, "data");
  const auto pads = attr_ints(op, attrs, "pads", 4);
  for (int64_t p : pads)
    if (p < 0) fail(op, "pads must be non-negative, got " + shape_str(pads));
  const auto &s = data.shape();
  const int64_t batch = s[0], height = s[1], width = s[2], channels = s[3];
  const int64_t out_h = height + pads[0] + pads[2] - 2, out_w = width + pads[1] + pads[3] - 2;
  if (out_h <= 0 || out_w <= 0)
    fail(op, "a 3x3 window does not fit the padded input " + shape_str(s) + " with pads " + shape_str(pads));
  const int64_t tiles_h = tiles(out_h, m), tiles_w = tiles(out_w, m);
  // A last tile that sticks out of the output reads zeros past the bottom and right
  // pads; the output transform drops what it computes from them.
  const std::vector<int64_t> padded_pads = {pads[0], pads[1], pads[2] + m * tiles_h - out_h,
                                            pads[3] + m * tiles_w - out_w};
  te::Tensor padded = pad_image(data, ImageLayout{true}, padded_pads, Expr(0));
  return te::compute(
      {a * a, batch * tiles_h * tiles_w, channels},
      [&](const std::vector<Var> &v) {
        const Expr &e = v[0], &p = v[1], &c = v[2];
        Expr n = ir::make_floordiv(p, Expr(tiles_h * tiles_w));
        Expr y0 = scaled(ir::make_floormod(ir::make_floordiv(p, Expr(tiles_w)), Expr(tiles_h)), m);
        Expr x0 = scaled(ir::make_floormod(p, Expr(tiles_w)), m);
        Expr row = ir::make_floordiv(e, Expr(a)), col = ir::make_floormod(e, Expr(a));
        return transform_tile(w.bt, row, col,
                              [&](int64_t i, int64_t j) { return padded(n, offset(y0, i), offset(x0, j), c); });
      },
      "winograd_input_transform");
}

te::Tensor winograd_output_transform(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "winograd_output_transform";
  const te::Tensor &products = in[0];
  const WinogradMatrices &w = matrices_of(op, attrs);
  const int64_t m = w.output_tile, a = w.input_tile;
  require_rank(op, products, 3, "products ([(m+2)^2, tiles, O])");
  require_float(op, products, "products");
  const int64_t out_h = attr_int(attrs, "height"), out_w = attr_int(attrs, "width");
  if (out_h <= 0 || out_w <= 0)
    fail(op, "height and width must be positive, got " + std::to_string(out_h) + " and " + std::to_string(out_w));
  const auto &s = products.shape();
  const int64_t tiles_h = tiles(out_h, m), tiles_w = tiles(out_w, m), channels = s[2];
  if (s[0] != a * a || s[1] % (tiles_h * tiles_w) != 0)
    fail(op, "products " + shape_str(s) + " do not come from " + std::to_string(a) + "x" + std::to_string(a) +
                 " tiles of a " + std::to_string(out_h) + "x" + std::to_string(out_w) + " output: expected [" +
                 std::to_string(a * a) + ", batch * " + std::to_string(tiles_h * tiles_w) + ", O]");
  if (in.size() > 1) {
    require_same_dtype(op, products, in[1]);
    if (in[1].shape() != std::vector<int64_t>{channels})
      fail(op, "bias has shape " + shape_str(in[1].shape()) + ", expected [" + std::to_string(channels) + "]");
  }
  const int64_t batch = s[1] / (tiles_h * tiles_w);
  return te::compute(
      {batch, out_h, out_w, channels},
      [&](const std::vector<Var> &v) {
        const Expr &n = v[0], &y = v[1], &x = v[2], &o = v[3];
        Expr p = scaled(n, tiles_h * tiles_w) + scaled(ir::make_floordiv(y, Expr(m)), tiles_w) +
                 ir::make_floordiv(x, Expr(m));
        Expr row = ir::make_floormod(y, Expr(m)), col = ir::make_floormod(x, Expr(m));
        Expr out =
            transform_tile(w.at, row, col, [&](int64_t i, int64_t j) { return products(Expr(i * a + j), p, o); });
        return in.size() > 1 ? out + in[1](o) : out;
      },
      "winograd_output_transform");
}

}  // namespace

std::vector<OpDef> winograd_ops() {
  std::vector<OpDef> ops;
  ops.push_back(
      OpDef{"winograd_input_transform",
            "Input transform of a Winograd F(mxm,3x3) convolution (a 3x3, stride-1 NHWC conv2d rewritten by the "
            "frontend). Input: data [N,H,W,C]. Attributes: pads [top,left,bottom,right] of the convolution, "
            "output_tile m (2 or 4). With A = m+2, OH = H+top+bottom-2, OW likewise, TH = ceil(OH/m), TW = "
            "ceil(OW/m): output V [A*A, N*TH*TW, C], V[A*a+b, (n*TH+i)*TW+j, c] = (Bt d B)[a,b] for the AxA tile d of "
            "the padded input at rows m*i.., columns m*j.. (zeros past the edges). Stages: pad, "
            "winograd_input_transform.",
            1, 1, json{{"output_tile", 2}, {"pads", {0, 0, 0, 0}}}, winograd_input_transform});
  ops.push_back(
      OpDef{"winograd_output_transform",
            "Output transform of a Winograd F(mxm,3x3) convolution. Inputs: M [A*A, N*TH*TW, O] (batch_matmul of the "
            "input transform and the transformed weights; A = m+2), optional bias [O]. Attributes: height, width (OH, "
            "OW of the convolution; TH = ceil(OH/m), TW = ceil(OW/m)), output_tile m (2 or 4). Output [N,OH,OW,O], "
            "each mxm block At M A of its tile (+ bias). Stage: winograd_output_transform.",
            1, 2, json{{"height", 1}, {"output_tile", 2}, {"width", 1}}, winograd_output_transform});
  return ops;
}

}  // namespace detail
}  // namespace kiln::ops
