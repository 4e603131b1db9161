// 2-d pooling over the spatial axes of an NCHW or NHWC image.
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

using ir::IterVar;

// The window geometry shared by max and average pooling, validated once.
struct Window {
  ImageLayout layout;
  std::vector<int64_t> kernel, strides, pads, dilations;
  std::vector<int64_t> out_shape;
};

Window parse_window(std::string_view op, const te::Tensor &data, const json &attrs) {
  Window w;
  w.layout = parse_image_layout(op, attrs);
  require_rank(op, data, 4, w.layout.nhwc ? "data (NHWC)" : "data (NCHW)");
  w.kernel = attr_ints(attrs, "kernel");
  if (w.kernel.empty()) fail(op, "attribute 'kernel' is required, e.g. {\"kernel\": [3, 3]}");
  w.kernel = attr_ints(op, attrs, "kernel", 2);
  w.strides = attr_ints(op, attrs, "strides", 2);
  w.pads = attr_ints(op, attrs, "pads", 4);
  w.dilations = attr_ints(op, attrs, "dilations", 2);
  for (int64_t k : w.kernel)
    if (k <= 0) fail(op, "kernel must be positive, got " + shape_str(w.kernel));
  for (int64_t s : w.strides)
    if (s <= 0) fail(op, "strides must be positive, got " + shape_str(w.strides));
  for (int64_t d : w.dilations)
    if (d <= 0) fail(op, "dilations must be positive, got " + shape_str(w.dilations));
  for (size_t i = 0; i < 4; ++i) {
    // ONNX requires pads smaller than the kernel; otherwise a window can lie entirely in
    // the padding and has no defined value.
    if (w.pads[i] < 0 || w.pads[i] >= w.kernel[i % 2])
      fail(op,
           "pads " + shape_str(w.pads) + " must be non-negative and smaller than the kernel " + shape_str(w.kernel));
  }
  const int64_t h = data.shape()[w.layout.h_axis()], wd = data.shape()[w.layout.w_axis()];
  const int64_t padded_h = h + w.pads[0] + w.pads[2], padded_w = wd + w.pads[1] + w.pads[3];
  const int64_t span_h = w.dilations[0] * (w.kernel[0] - 1) + 1, span_w = w.dilations[1] * (w.kernel[1] - 1) + 1;
  if (span_h > padded_h || span_w > padded_w)
    fail(op, "the (dilated) window " + std::to_string(span_h) + "x" + std::to_string(span_w) +
                 " is larger than the padded input " + std::to_string(padded_h) + "x" + std::to_string(padded_w));
  w.out_shape = data.shape();
  w.out_shape[w.layout.h_axis()] = (padded_h - span_h) / w.strides[0] + 1;
  w.out_shape[w.layout.w_axis()] = (padded_w - span_w) / w.strides[1] + 1;
  return w;
}

// Reduces `padded` over the window at every output position with `reducer`.
te::Tensor pool_reduce(const te::Tensor &padded, const Window &w, Expr (*reducer)(Expr, std::vector<IterVar>),
                       const std::string &name) {
  IterVar ry = te::reduce_axis(w.kernel[0], "ry"), rx = te::reduce_axis(w.kernel[1], "rx");
  const size_t h = w.layout.h_axis(), wd = w.layout.w_axis();
  return te::compute(
      w.out_shape,
      [&](const std::vector<Var> &v) {
        std::vector<Expr> idx = to_exprs(v);
        idx[h] = scaled(v[h], w.strides[0]) + scaled(ry.var, w.dilations[0]);
        idx[wd] = scaled(v[wd], w.strides[1]) + scaled(rx.var, w.dilations[1]);
        return reducer(padded(idx), {ry, rx});
      },
      name);
}

te::Tensor max_pool2d(const std::vector<te::Tensor> &in, const json &attrs) {
  const te::Tensor &data = in[0];
  if (data.dtype() == DType::kBool) fail("max_pool2d", "boolean inputs are not supported");
  Window w = parse_window("max_pool2d", data, attrs);
  // Padding with the lowest value makes it invisible to the maximum.
  te::Tensor padded = pad_image(data, w.layout, w.pads, ir::combiner_identity(ir::Combiner::kMax, data.dtype()));
  return pool_reduce(padded, w, &te::max_of, "max_pool2d");
}

// Number of taps k in [0, kernel) whose input position o*stride - pad + k*dilation lies in
// [0, size): the divisor of average pooling that excludes padding, as index arithmetic.
Expr valid_taps(const Expr &o, int64_t stride, int64_t pad, int64_t dilation, int64_t kernel, int64_t size) {
  Expr start = scaled(o, stride) - Expr(pad);  // input position of tap 0
  // first = ceil(-start / d) clamped to >= 0; last = floor((size - 1 - start) / d) clamped to <= kernel-1.
  auto div = [&](const Expr &e) { return dilation == 1 ? e : ir::make_floordiv(e, Expr(dilation)); };
  Expr first = ir::make_max(div(Expr(dilation - 1) - start), Expr(0));
  Expr last = ir::make_min(div(Expr(size - 1) - start), Expr(kernel - 1));
  return ir::make_max(last - first + Expr(1), Expr(1));
}

te::Tensor avg_pool2d(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "avg_pool2d";
  const te::Tensor &data = in[0];
  require_float(op, data, "data");
  Window w = parse_window(op, data, attrs);
  const bool include_pad = attr_bool(attrs, "count_include_pad");
  te::Tensor padded = pad_image(data, w.layout, w.pads, Expr(0));
  te::Tensor sum = pool_reduce(padded, w, &te::sum, "avg_pool2d_sum");
  const bool padded_any = w.pads[0] || w.pads[1] || w.pads[2] || w.pads[3];
  const size_t h = w.layout.h_axis(), wd = w.layout.w_axis();
  const int64_t height = data.shape()[h], width = data.shape()[wd];
  return te::compute(
      w.out_shape,
      [&](const std::vector<Var> &v) {
        Expr count;
        if (include_pad || !padded_any) {
          count = ir::make_float(static_cast<double>(w.kernel[0] * w.kernel[1]), data.dtype());
        } else {
          Expr taps_h = valid_taps(v[h], w.strides[0], w.pads[0], w.dilations[0], w.kernel[0], height);
          Expr taps_w = valid_taps(v[wd], w.strides[1], w.pads[1], w.dilations[1], w.kernel[1], width);
          count = ir::make_cast(data.dtype(), taps_h * taps_w);
        }
        return sum(to_exprs(v)) / count;
      },
      "avg_pool2d");
}

te::Tensor global_avg_pool2d(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "global_avg_pool2d";
  const te::Tensor &data = in[0];
  const ImageLayout layout = parse_image_layout(op, attrs);
  require_rank(op, data, 4, layout.nhwc ? "data (NHWC)" : "data (NCHW)");
  require_float(op, data, "data");
  const size_t h = layout.h_axis(), wd = layout.w_axis();
  const int64_t height = data.shape()[h], width = data.shape()[wd];
  std::vector<int64_t> out_shape = data.shape();
  out_shape[h] = out_shape[wd] = 1;
  IterVar ry = te::reduce_axis(height, "ry"), rx = te::reduce_axis(width, "rx");
  te::Tensor sum = te::compute(
      out_shape,
      [&](const std::vector<Var> &v) {
        std::vector<Expr> idx = to_exprs(v);
        idx[h] = ry.var;
        idx[wd] = rx.var;
        return te::sum(data(idx), {ry, rx});
      },
      "global_avg_pool2d_sum");
  Expr count = ir::make_float(static_cast<double>(height * width), data.dtype());
  return te::compute(
      out_shape, [&](const std::vector<Var> &v) { return sum(to_exprs(v)) / count; }, "global_avg_pool2d");
}

json window_defaults() {
  return json{{"layout", "NCHW"},
              {"kernel", json::array()},
              {"strides", {1, 1}},
              {"pads", {0, 0, 0, 0}},
              {"dilations", {1, 1}}};
}

}  // namespace

std::vector<OpDef> pooling_ops() {
  std::vector<OpDef> ops;
  ops.push_back(OpDef{"max_pool2d",
                      "2-d max pooling (ONNX MaxPool, ceil_mode=0). Input: data [N,C,H,W] (layout \"NCHW\") or "
                      "[N,H,W,C] (\"NHWC\"). Attributes: kernel [kh,kw] (required), strides [sh,sw] (1,1), pads "
                      "[top,left,bottom,right] (each smaller than the kernel), dilations [dh,dw]. Output spatial "
                      "size (H+top+bottom-dh*(kh-1)-1)/sh+1. Stages: pad (lowest value; only with padding), "
                      "max_pool2d. Any numeric dtype.",
                      1, 1, window_defaults(), max_pool2d});
  json avg_defaults = window_defaults();
  avg_defaults["count_include_pad"] = false;
  ops.push_back(OpDef{"avg_pool2d",
                      "2-d average pooling (ONNX AveragePool, ceil_mode=0). Input and attributes as max_pool2d, "
                      "plus count_include_pad (false, as ONNX): when false, padded positions are not counted in "
                      "the divisor. Stages: pad (zeros; only with padding), avg_pool2d_sum, avg_pool2d. Float "
                      "inputs only.",
                      1, 1, avg_defaults, avg_pool2d});
  ops.push_back(OpDef{"global_avg_pool2d",
                      "Mean over the spatial axes (ONNX GlobalAveragePool). Input: data [N,C,H,W] (layout "
                      "\"NCHW\", the default) or [N,H,W,C] (\"NHWC\"). Output keeps the spatial axes with extent "
                      "1: [N,C,1,1] or [N,1,1,C]. Stages: global_avg_pool2d_sum, global_avg_pool2d. Float inputs "
                      "only.",
                      1, 1, json{{"layout", "NCHW"}}, global_avg_pool2d});
  return ops;
}

}  // namespace kiln::ops::detail
