// Compute-heavy operators: convolution and the matrix products. These are the stages
// multi-level tiling targets, so each is a single reduction whose body is a product of
// two loads; padding and bias live in their own element-wise stages.
#include <algorithm>
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

using ir::IterVar;

Expr widened_product(const Expr &a, const Expr &b, DType acc) { return ir::make_cast(acc, a) * ir::make_cast(acc, b); }

void require_matching_inputs(std::string_view op, const te::Tensor &a, const te::Tensor &b) {
  require_same_dtype(op, a, b);
  if (a.dtype() == DType::kBool) fail(op, "boolean inputs are not supported");
}

te::Tensor conv2d(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "conv2d";
  const te::Tensor &data = in[0], &weight = in[1];
  const ImageLayout layout = parse_image_layout(op, attrs);
  const auto strides = attr_ints(op, attrs, "strides", 2);
  const auto pads = attr_ints(op, attrs, "pads", 4);
  const auto dilations = attr_ints(op, attrs, "dilations", 2);
  const int64_t groups = attr_int(attrs, "groups");
  require_rank(op, data, 4, layout.nhwc ? "data (NHWC)" : "data (NCHW)");
  require_rank(op, weight, 4, layout.nhwc ? "weight (HWIO)" : "weight (OIHW)");
  require_matching_inputs(op, data, weight);
  for (int64_t s : strides)
    if (s <= 0) fail(op, "strides must be positive, got " + shape_str(strides));
  for (int64_t d : dilations)
    if (d <= 0) fail(op, "dilations must be positive, got " + shape_str(dilations));
  for (int64_t p : pads)
    if (p < 0) fail(op, "pads must be non-negative, got " + shape_str(pads));
  if (groups <= 0) fail(op, "groups must be positive, got " + std::to_string(groups));

  const auto &ds = data.shape(), &ws = weight.shape();
  const int64_t batch = ds[0], channels = ds[layout.c_axis()];
  const int64_t height = ds[layout.h_axis()], width = ds[layout.w_axis()];
  // OIHW for NCHW, HWIO for NHWC: the weight layout each data layout is fastest with.
  const int64_t out_channels = layout.nhwc ? ws[3] : ws[0];
  const int64_t weight_in = layout.nhwc ? ws[2] : ws[1];
  const int64_t kh = layout.nhwc ? ws[0] : ws[2], kw = layout.nhwc ? ws[1] : ws[3];
  if (channels % groups != 0)
    fail(op, "input channels (" + std::to_string(channels) + ") are not divisible by groups (" +
                 std::to_string(groups) + ")");
  if (out_channels % groups != 0)
    fail(op, "output channels (" + std::to_string(out_channels) + ") are not divisible by groups (" +
                 std::to_string(groups) + ")");
  const int64_t group_in = channels / groups, group_out = out_channels / groups;
  if (weight_in != group_in)
    fail(op, "input has " + std::to_string(channels) + " channels, so with groups=" + std::to_string(groups) +
                 " the weight needs " + std::to_string(group_in) + " input channels per group, but weight shape " +
                 shape_str(ws) + " has " + std::to_string(weight_in) +
                 (layout.nhwc ? " (weight layout is HWIO)" : " (weight layout is OIHW)"));
  const int64_t padded_h = height + pads[0] + pads[2], padded_w = width + pads[1] + pads[3];
  const int64_t span_h = dilations[0] * (kh - 1) + 1, span_w = dilations[1] * (kw - 1) + 1;
  if (span_h > padded_h || span_w > padded_w)
    fail(op, "the dilated kernel (" + std::to_string(span_h) + "x" + std::to_string(span_w) +
                 ") is larger than the padded input (" + std::to_string(padded_h) + "x" + std::to_string(padded_w) +
                 "); the output would be empty");
  const int64_t out_h = (padded_h - span_h) / strides[0] + 1, out_w = (padded_w - span_w) / strides[1] + 1;

  te::Tensor padded = pad_image(data, layout, pads, Expr(0));
  // A channel reduce axis of extent 1 (depthwise) would only add noise to the loop nest.
  std::vector<IterVar> reduce;
  IterVar rc;
  if (group_in > 1) {
    rc = te::reduce_axis(group_in, "rc");
    reduce.push_back(rc);
  }
  IterVar ry = te::reduce_axis(kh, "ry"), rx = te::reduce_axis(kw, "rx");
  reduce.push_back(ry);
  reduce.push_back(rx);
  const DType acc = accumulate_dtype(data.dtype());

  std::vector<int64_t> out_shape = layout.nhwc ? std::vector<int64_t>{batch, out_h, out_w, out_channels}
                                               : std::vector<int64_t>{batch, out_channels, out_h, out_w};
  te::Tensor out = te::compute(
      out_shape,
      [&](const std::vector<Var> &v) {
        const Expr &n = v[0], &oc = v[layout.c_axis()], &y = v[layout.h_axis()], &x = v[layout.w_axis()];
        // Input channel read by output channel oc: group(oc) * group_in + rc.
        Expr in_c;
        if (groups == 1) {
          in_c = group_in == 1 ? Expr(0) : Expr(rc.var);
        } else {
          Expr group = group_out == 1 ? Expr(oc) : ir::make_floordiv(oc, Expr(group_out));
          in_c = group_in == 1 ? group : scaled(group, group_in) + rc.var;
        }
        Expr iy = scaled(y, strides[0]) + scaled(ry.var, dilations[0]);
        Expr ix = scaled(x, strides[1]) + scaled(rx.var, dilations[1]);
        Expr w_c = group_in == 1 ? Expr(0) : Expr(rc.var);
        Expr d = layout.nhwc ? padded(n, iy, ix, in_c) : padded(n, in_c, iy, ix);
        Expr w = layout.nhwc ? weight(ry.var, rx.var, w_c, oc) : weight(oc, w_c, ry.var, rx.var);
        return te::sum(widened_product(d, w, acc), reduce);
      },
      "conv2d");
  if (in.size() > 2) return add_channel_bias(op, out, in[2], layout.c_axis());
  return out;
}

te::Tensor dense(const std::vector<te::Tensor> &in, const json &) {
  const char *op = "dense";
  const te::Tensor &x = in[0], &w = in[1];
  require_rank(op, x, 2, "x ([M, K])");
  require_rank(op, w, 2, "weight ([N, K])");
  require_matching_inputs(op, x, w);
  const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[0];
  if (w.shape()[1] != k)
    fail(op, "x has shape " + shape_str(x.shape()) + " but weight has shape " + shape_str(w.shape()) +
                 "; the weight must be [N, " + std::to_string(k) + "] (transposed, like ONNX Gemm transB=1)");
  const DType acc = accumulate_dtype(x.dtype());
  IterVar rk = te::reduce_axis(k, "rk");
  te::Tensor out = te::compute(
      {m, n},
      [&](const std::vector<Var> &v) { return te::sum(widened_product(x(v[0], rk.var), w(v[1], rk.var), acc), {rk}); },
      "dense");
  if (in.size() > 2) return add_channel_bias(op, out, in[2], 1);
  return out;
}

te::Tensor matmul(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "matmul";
  const te::Tensor &a = in[0], &b = in[1];
  const bool ta = attr_bool(attrs, "transpose_a"), tb = attr_bool(attrs, "transpose_b");
  require_rank(op, a, 2, ta ? "A ([K, M] with transpose_a)" : "A ([M, K])");
  require_rank(op, b, 2, tb ? "B ([N, K] with transpose_b)" : "B ([K, N])");
  require_matching_inputs(op, a, b);
  const int64_t m = a.shape()[ta ? 1 : 0], k = a.shape()[ta ? 0 : 1];
  const int64_t kb = b.shape()[tb ? 1 : 0], n = b.shape()[tb ? 0 : 1];
  if (k != kb)
    fail(op, "inner dimensions differ: A " + shape_str(a.shape()) + (ta ? " (transposed)" : "") +
                 " has K=" + std::to_string(k) + ", B " + shape_str(b.shape()) + (tb ? " (transposed)" : "") +
                 " has K=" + std::to_string(kb));
  const DType acc = accumulate_dtype(a.dtype());
  IterVar rk = te::reduce_axis(k, "rk");
  return te::compute(
      {m, n},
      [&](const std::vector<Var> &v) {
        Expr lhs = ta ? a(rk.var, v[0]) : a(v[0], rk.var);
        Expr rhs = tb ? b(v[1], rk.var) : b(rk.var, v[1]);
        return te::sum(widened_product(lhs, rhs, acc), {rk});
      },
      "matmul");
}

te::Tensor batch_matmul(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "batch_matmul";
  const te::Tensor &a = in[0], &b = in[1];
  const bool ta = attr_bool(attrs, "transpose_a"), tb = attr_bool(attrs, "transpose_b");
  require_rank(op, a, 3, ta ? "A ([B, K, M] with transpose_a)" : "A ([B, M, K])");
  require_rank(op, b, 3, tb ? "B ([B, N, K] with transpose_b)" : "B ([B, K, N])");
  require_matching_inputs(op, a, b);
  const int64_t ba = a.shape()[0], bb = b.shape()[0];
  if (ba != bb && ba != 1 && bb != 1)
    fail(op, "batch dimensions " + std::to_string(ba) + " and " + std::to_string(bb) +
                 " differ and neither is 1, so they do not broadcast");
  const int64_t batch = std::max(ba, bb);
  const int64_t m = a.shape()[ta ? 2 : 1], k = a.shape()[ta ? 1 : 2];
  const int64_t kb = b.shape()[tb ? 2 : 1], n = b.shape()[tb ? 1 : 2];
  if (k != kb)
    fail(op, "inner dimensions differ: A " + shape_str(a.shape()) + (ta ? " (transposed)" : "") +
                 " has K=" + std::to_string(k) + ", B " + shape_str(b.shape()) + (tb ? " (transposed)" : "") +
                 " has K=" + std::to_string(kb));
  const DType acc = accumulate_dtype(a.dtype());
  IterVar rk = te::reduce_axis(k, "rk");
  return te::compute(
      {batch, m, n},
      [&](const std::vector<Var> &v) {
        // A batch of one on both sides is indexed by its iterator, as in the binary ops.
        Expr bi_a = ba == 1 && batch != 1 ? Expr(0) : Expr(v[0]);
        Expr bi_b = bb == 1 && batch != 1 ? Expr(0) : Expr(v[0]);
        Expr lhs = ta ? a(bi_a, rk.var, v[1]) : a(bi_a, v[1], rk.var);
        Expr rhs = tb ? b(bi_b, v[2], rk.var) : b(bi_b, rk.var, v[2]);
        return te::sum(widened_product(lhs, rhs, acc), {rk});
      },
      "batch_matmul");
}

}  // namespace

std::vector<OpDef> nn_ops() {
  std::vector<OpDef> ops;
  ops.push_back(OpDef{
      "conv2d",
      "2-d convolution (ONNX Conv with explicit pads). Inputs: data, weight, optional bias[O]. Layout \"NCHW\": "
      "data [N,C,H,W], weight OIHW [O,C/groups,KH,KW], output [N,O,OH,OW]. Layout \"NHWC\": data [N,H,W,C], "
      "weight HWIO [KH,KW,C/groups,O], output [N,OH,OW,O]. Attributes: strides [sh,sw], pads "
      "[top,left,bottom,right], dilations [dh,dw], groups (C and O divisible by groups; groups == C is a "
      "depthwise convolution, there is no separate depthwise operator). OH = (H+top+bottom-dh*(KH-1)-1)/sh+1. "
      "Stages: pad (only when some pad is non-zero), conv2d, bias_add (with bias). int8 inputs accumulate "
      "and produce int32; the bias then is int32.",
      2, 3, json{{"layout", "NCHW"}, {"strides", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"dilations", {1, 1}}, {"groups", 1}},
      conv2d});
  ops.push_back(OpDef{"dense",
                      "Fully connected layer (ONNX Gemm with transB=1, alpha=beta=1). Inputs: x [M,K], weight "
                      "[N,K], optional bias [N]. Output [M,N] = x * weight^T (+ bias). Stages: dense, bias_add "
                      "(with bias). int8 inputs accumulate and produce int32.",
                      2, 3, json::object(), dense});
  ops.push_back(OpDef{"matmul",
                      "Matrix product (ONNX MatMul for 2-d inputs). Inputs: A [M,K] ([K,M] when transpose_a), B "
                      "[K,N] ([N,K] when transpose_b). Attributes: transpose_a, transpose_b (false). Output "
                      "[M,N]. Stage: matmul. int8 inputs accumulate and produce int32.",
                      2, 2, json{{"transpose_a", false}, {"transpose_b", false}}, matmul});
  ops.push_back(OpDef{"batch_matmul",
                      "Batched matrix product (ONNX MatMul for 3-d inputs). Inputs: A [B,M,K] ([B,K,M] when "
                      "transpose_a), B [B,K,N] ([B,N,K] when transpose_b); a batch dimension of 1 broadcasts. "
                      "Attributes: transpose_a, transpose_b (false). Output [B,M,N]. Stage: batch_matmul. int8 "
                      "inputs accumulate and produce int32.",
                      2, 2, json{{"transpose_a", false}, {"transpose_b", false}}, batch_matmul});
  return ops;
}

}  // namespace kiln::ops::detail
