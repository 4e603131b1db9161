// Winograd F(2x2, 3x3): a 3x3 stride-1 convolution as a batched matrix product between
// two cheap transforms (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks"). Each 2x2 block of outputs reads a 4x4 tile of the input:
//
//   Y = At [ (G g Gt) . (Bt d B) ] A      (. elementwise over the 16 tile positions)
//
// Summed over input channels, the 16 elementwise products become 16 matrix products
// [tiles x C] x [C x O]: 16 multiply-adds per 4 outputs and channel pair where the
// direct convolution spends 36. The weight transform U = G g Gt is done once, at import
// (frontend/passes.h, rewrite_winograd_convolutions); these two operators are the
// input transform V = Bt d B and the output transform Y = At M A. Their matrices hold
// only 0 and +-1, so each is a few additions per element, written out here instead of
// read from a table: the tile position e is a loop of the stage, and once the search
// unrolls it every select folds away.
#include <string>

#include "ir/ops/op_util.h"

namespace kiln::ops::detail {
namespace {

constexpr int64_t kTile = 4;    // input tile: m + r - 1 = 2 + 3 - 1
constexpr int64_t kOutput = 2;  // outputs per tile and axis (m)

Expr equals(const Expr &a, int64_t b) { return ir::make_cmp(ir::ExprKind::kEQ, a, Expr(b)); }

// Row k of Bt applied to (x0, x1, x2, x3); Bt = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
Expr input_row(const Expr &k, const Expr &x0, const Expr &x1, const Expr &x2, const Expr &x3) {
  return ir::make_select(equals(k, 0), x0 - x2,
                         ir::make_select(equals(k, 1), x1 + x2, ir::make_select(equals(k, 2), x2 - x1, x1 - x3)));
}

// Row k of At applied to (m0, m1, m2, m3); At = [1 1 1 0; 0 1 -1 -1].
Expr output_row(const Expr &k, const Expr &m0, const Expr &m1, const Expr &m2, const Expr &m3) {
  return ir::make_select(equals(k, 0), m0 + m1 + m2, m1 - m2 - m3);
}

int64_t tiles(int64_t extent) { return (extent + kOutput - 1) / kOutput; }

te::Tensor winograd_input_transform(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "winograd_input_transform";
  const te::Tensor &data = in[0];
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
  const int64_t tiles_h = tiles(out_h), tiles_w = tiles(out_w);
  // A last tile that sticks out of an odd output reads zeros past the bottom and right
  // pads; the output transform drops what it computes from them.
  const std::vector<int64_t> padded_pads = {pads[0], pads[1], pads[2] + kOutput * tiles_h - out_h,
                                            pads[3] + kOutput * tiles_w - out_w};
  te::Tensor padded = pad_image(data, ImageLayout{true}, padded_pads, Expr(0));
  return te::compute(
      {kTile * kTile, batch * tiles_h * tiles_w, channels},
      [&](const std::vector<Var> &v) {
        const Expr &e = v[0], &p = v[1], &c = v[2];
        Expr n = ir::make_floordiv(p, Expr(tiles_h * tiles_w));
        Expr y0 = scaled(ir::make_floormod(ir::make_floordiv(p, Expr(tiles_w)), Expr(tiles_h)), kOutput);
        Expr x0 = scaled(ir::make_floormod(p, Expr(tiles_w)), kOutput);
        Expr row = ir::make_floordiv(e, Expr(kTile)), col = ir::make_floormod(e, Expr(kTile));
        auto d = [&](int64_t i, int64_t j) { return padded(n, offset(y0, i), offset(x0, j), c); };
        auto across = [&](int64_t i) { return input_row(col, d(i, 0), d(i, 1), d(i, 2), d(i, 3)); };
        return input_row(row, across(0), across(1), across(2), across(3));
      },
      "winograd_input_transform");
}

te::Tensor winograd_output_transform(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "winograd_output_transform";
  const te::Tensor &m = in[0];
  require_rank(op, m, 3, "products ([16, tiles, O])");
  require_float(op, m, "products");
  const int64_t out_h = attr_int(attrs, "height"), out_w = attr_int(attrs, "width");
  if (out_h <= 0 || out_w <= 0)
    fail(op, "height and width must be positive, got " + std::to_string(out_h) + " and " + std::to_string(out_w));
  const auto &s = m.shape();
  const int64_t tiles_h = tiles(out_h), tiles_w = tiles(out_w), channels = s[2];
  if (s[0] != kTile * kTile || s[1] % (tiles_h * tiles_w) != 0)
    fail(op, "products " + shape_str(s) + " do not come from 4x4 tiles of a " + std::to_string(out_h) + "x" +
                 std::to_string(out_w) + " output: expected [16, batch * " + std::to_string(tiles_h * tiles_w) +
                 ", O]");
  if (in.size() > 1) {
    require_same_dtype(op, m, in[1]);
    if (in[1].shape() != std::vector<int64_t>{channels})
      fail(op, "bias has shape " + shape_str(in[1].shape()) + ", expected [" + std::to_string(channels) + "]");
  }
  const int64_t batch = s[1] / (tiles_h * tiles_w);
  return te::compute(
      {batch, out_h, out_w, channels},
      [&](const std::vector<Var> &v) {
        const Expr &n = v[0], &y = v[1], &x = v[2], &o = v[3];
        Expr p = scaled(n, tiles_h * tiles_w) + scaled(ir::make_floordiv(y, Expr(kOutput)), tiles_w) +
                 ir::make_floordiv(x, Expr(kOutput));
        Expr row = ir::make_floormod(y, Expr(kOutput)), col = ir::make_floormod(x, Expr(kOutput));
        auto at = [&](int64_t i, int64_t j) { return m(Expr(i * kTile + j), p, o); };
        auto across = [&](int64_t i) { return output_row(col, at(i, 0), at(i, 1), at(i, 2), at(i, 3)); };
        Expr out = output_row(row, across(0), across(1), across(2), across(3));
        return in.size() > 1 ? out + in[1](o) : out;
      },
      "winograd_output_transform");
}

}  // namespace

std::vector<OpDef> winograd_ops() {
  std::vector<OpDef> ops;
  ops.push_back(OpDef{
      "winograd_input_transform",
      "Input transform of a Winograd F(2x2,3x3) convolution (a 3x3, stride-1 NHWC conv2d rewritten by the "
      "frontend). Input: data [N,H,W,C]. Attribute: pads [top,left,bottom,right] of the convolution. With OH = "
      "H+top+bottom-2, OW likewise, TH = ceil(OH/2), TW = ceil(OW/2): output V [16, N*TH*TW, C], V[4a+b, "
      "(n*TH+i)*TW+j, c] = (Bt d B)[a,b] for the 4x4 tile d of the padded input at rows 2i.., columns 2j.. (zeros "
      "past the edges). Stages: pad, winograd_input_transform.",
      1, 1, json{{"pads", {0, 0, 0, 0}}}, winograd_input_transform});
  ops.push_back(
      OpDef{"winograd_output_transform",
            "Output transform of a Winograd F(2x2,3x3) convolution. Inputs: M [16, N*TH*TW, O] (batch_matmul of the "
            "input transform and the transformed weights), optional bias [O]. Attributes: height, width (OH, OW of the "
            "convolution; TH = ceil(OH/2), TW = ceil(OW/2)). Output [N,OH,OW,O], each 2x2 block At M A of its tile "
            "(+ bias). Stage: winograd_output_transform.",
            1, 2, json{{"height", 1}, {"width", 1}}, winograd_output_transform});
  return ops;
}

}  // namespace kiln::ops::detail
