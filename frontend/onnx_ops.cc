// One importer per ONNX operator type: each translates the node into Kiln operators
// (ops/), or computes it when its inputs are constants (shape subgraphs).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "frontend/import_context.h"
#include "frontend/onnx_tensor.h"

namespace kiln::frontend {
namespace {

using ir::DType;
using ir::HostTensor;
using nlohmann::json;

int64_t product(const std::vector<int64_t> &v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// A negative axis counts from the end; fails for axes outside [-rank, rank).
int64_t normalize_axis(ImportContext &c, int64_t axis, size_t rank) {
  auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) c.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

HostTensor scalar(DType dtype, double value) {
  HostTensor t(dtype, {1});
  t.set(0, value);
  return t;
}

HostTensor int64_tensor(const std::vector<int64_t> &values) {
  HostTensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

// Element `flat` of a constant read as int64 exactly (double loses big int64 values).
int64_t int_at(const HostTensor &t, int64_t flat) {
  if (t.dtype() == DType::kInt64) return static_cast<const int64_t *>(t.data())[flat];
  return static_cast<int64_t>(t.get(flat));
}

void set_int(HostTensor &t, int64_t flat, int64_t value) {
  if (t.dtype() == DType::kInt64)
    static_cast<int64_t *>(t.data())[flat] = value;
  else
    t.set(flat, static_cast<double>(value));
}

HostTensor cast_tensor(const HostTensor &in, DType to) {
  HostTensor out(to, in.shape());
  for (int64_t i = 0; i < in.size(); ++i) {
    if (ir::is_int(to) && ir::is_int(in.dtype()))
      set_int(out, i, int_at(in, i));
    else if (to == DType::kBool)
      out.set(i, in.get(i) != 0.0 ? 1.0 : 0.0);
    else if (ir::is_int(to))
      set_int(out, i, static_cast<int64_t>(std::trunc(in.get(i))));
    else
      out.set(i, in.get(i));
  }
  return out;
}

std::vector<int64_t> strides_of(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// `s` with leading 1s up to `rank` axes.
std::vector<int64_t> padded_shape(const std::vector<int64_t> &s, size_t rank) {
  std::vector<int64_t> p(rank - s.size(), 1);
  p.insert(p.end(), s.begin(), s.end());
  return p;
}

// The numpy broadcast of two shapes (fails naming both when they do not broadcast).
std::vector<int64_t> broadcast_shape(ImportContext &c, const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> sa = padded_shape(a, rank), sb = padded_shape(b, rank), out(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (sa[d] != sb[d] && sa[d] != 1 && sb[d] != 1)
      c.fail("shapes " + shape_string(a) + " and " + shape_string(b) + " do not broadcast");
    out[d] = sa[d] == 1 ? sb[d] : sa[d];
  }
  return out;
}

// Numpy broadcasting of constants, element by element in int64 or double.
HostTensor broadcast_constants(ImportContext &c, const HostTensor &a, const HostTensor &b, DType out_dtype,
                               const std::function<double(double, double)> &f,
                               const std::function<int64_t(int64_t, int64_t)> &fi) {
  std::vector<int64_t> out_shape = broadcast_shape(c, a.shape(), b.shape());
  size_t rank = out_shape.size();
  std::vector<int64_t> sa = padded_shape(a.shape(), rank), sb = padded_shape(b.shape(), rank);
  c.check_constant_shape(out_shape, "the constant result");
  HostTensor out(out_dtype, out_shape);
  std::vector<int64_t> so = strides_of(out_shape), ta = strides_of(sa), tb = strides_of(sb);
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t ia = 0, ib = 0, rest = i;
    for (size_t d = 0; d < rank; ++d) {
      int64_t idx = rest / so[d];
      rest %= so[d];
      ia += (sa[d] == 1 ? 0 : idx) * ta[d];
      ib += (sb[d] == 1 ? 0 : idx) * tb[d];
    }
    if (ir::is_int(out_dtype) && ir::is_int(a.dtype()) && ir::is_int(b.dtype()))
      set_int(out, i, fi(int_at(a, ia), int_at(b, ib)));
    else
      out.set(i, f(a.get(ia), b.get(ib)));
  }
  return out;
}

// ---- element-wise ---------------------------------------------------------------------

OpImporter unary(const std::string &op) {
  return [op](ImportContext &c) { c.set_output(0, c.emit(op, {c.input(0)})); };
}

struct BinaryOp {
  std::string kiln_op;
  std::function<double(double, double)> f;
  std::function<int64_t(int64_t, int64_t)> fi;
};

// Combines two operands; variadic ONNX operators (Max, Min, Sum) fold over all inputs.
ValueId combine(ImportContext &c, const BinaryOp &b, ValueId x, ValueId y);

OpImporter binary(BinaryOp b, bool variadic = false) {
  return [b, variadic](ImportContext &c) {
    if (!variadic && c.num_inputs() != 2) c.fail("needs 2 inputs");
    if (c.num_inputs() < 1) c.fail("needs at least one input");
    ValueId acc = c.input(0);
    for (int i = 1; i < c.num_inputs(); ++i) acc = combine(c, b, acc, c.input(i));
    c.set_output(0, acc);
  };
}

ValueId combine(ImportContext &c, const BinaryOp &b, ValueId x, ValueId y) {
  // Copies: adding a constant below may move the graph's values.
  std::shared_ptr<const HostTensor> cx = c.value(x).constant, cy = c.value(y).constant;
  DType tx = c.type(x).dtype, ty = c.type(y).dtype;
  if (cx && cy) return c.constant(broadcast_constants(c, *cx, *cy, tx, b.f, b.fi));
  // A constant operand of another dtype (Pow's int64 exponent) takes the other's.
  if (tx != ty) {
    if (cy)
      y = c.constant(cast_tensor(*cy, tx));
    else if (cx)
      x = c.constant(cast_tensor(*cx, ty));
    else
      c.fail("operands have different element types");
  }
  return c.emit(b.kiln_op, {x, y});
}

void import_clip(ImportContext &c) {
  double lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
  if (c.opset() < 11) {
    lo = c.attr_float("min", static_cast<float>(lo));
    hi = c.attr_float("max", static_cast<float>(hi));
  } else {
    if (c.has_input(1)) lo = c.scalar_input(1, "min");
    if (c.has_input(2)) hi = c.scalar_input(2, "max");
  }
  c.set_output(0, c.emit("clip", {c.input(0)}, {{"min", lo}, {"max", hi}}));
}

// alpha * x + beta, clamped to [0, 1]; HardSwish multiplies it by x.
ValueId hard_sigmoid(ImportContext &c, ValueId x, double alpha, double beta) {
  DType t = c.type(x).dtype;
  ValueId ax = c.emit("mul", {x, c.constant(scalar(t, alpha))});
  ValueId shifted = c.emit("add", {ax, c.constant(scalar(t, beta))});
  return c.emit("clip", {shifted}, {{"min", 0.0}, {"max", 1.0}});
}

// ---- convolution, matrix products, pooling --------------------------------------------

// Explicit [top, left, bottom, right] pads from `pads` or `auto_pad`.
std::vector<int64_t> spatial_pads(ImportContext &c, const std::vector<int64_t> &in, const std::vector<int64_t> &kernel,
                                  const std::vector<int64_t> &strides, const std::vector<int64_t> &dilations) {
  std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = c.attr_ints("pads", {0, 0, 0, 0});
    if (pads.size() != 4) c.fail("pads must have 4 values for a 2-d window");
    return pads;
  }
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    c.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  std::vector<int64_t> pads(4);
  for (size_t d = 0; d < 2; ++d) {
    int64_t out = (in[d] + strides[d] - 1) / strides[d];
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in[d]);
    int64_t small = total / 2, large = total - small;
    pads[d] = auto_pad == "SAME_UPPER" ? small : large;
    pads[d + 2] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

void require_2d_window(ImportContext &c, ValueId x) {
  if (c.type(x).shape.size() != 4)
    c.fail("input has shape " + shape_string(c.type(x).shape) + "; Kiln supports 2-d windows on NCHW (4-d) inputs");
}

// Resize of an image's height and width (upsampling in detectors and segmentation
// heads): scales or sizes must be constants, batch and channel kept; nearest or
// bilinear with ONNX's coordinate transformations.
void import_resize(ImportContext &c) {
  ValueId x = c.input(0);
  require_2d_window(c, x);
  const std::vector<int64_t> in = c.type(x).shape;
  const std::string mode = c.attr_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear") c.fail("mode '" + mode + "' is not supported (nearest and linear are)");
  if (c.attr_int("antialias", 0) != 0) c.fail("antialias=1 is not supported");
  if (c.attr_int("exclude_outside", 0) != 0) c.fail("exclude_outside=1 is not supported");
  if (c.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    c.fail("keep_aspect_ratio_policy other than stretch is not supported");
  // axes (opset 18): the axes scales and sizes list; the others keep their extent.
  std::vector<int64_t> axes = c.attr_ints("axes", {0, 1, 2, 3});
  for (int64_t &a : axes) {
    if (a < -4 || a > 3) c.fail("axis " + std::to_string(a) + " is out of range for a 4-d input");
    if (a < 0) a += 4;
  }
  std::vector<double> scales(4, 1.0);
  std::vector<int64_t> sizes = in;
  const bool by_sizes = c.has_input(3);
  if (by_sizes) {
    std::vector<int64_t> given = c.int_list_input(3, "sizes");
    if (given.size() != axes.size())
      c.fail("sizes has " + std::to_string(given.size()) + " values for " + std::to_string(axes.size()) + " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto a = static_cast<size_t>(axes[k]);
      if (given[k] < 1) c.fail("sizes must be positive, got " + std::to_string(given[k]));
      sizes[a] = given[k];
      scales[a] = static_cast<double>(given[k]) / static_cast<double>(in[a]);
    }
  } else if (c.has_input(2)) {
    const ir::HostTensor &given = c.constant_input(2, "scales");
    if (given.size() != static_cast<int64_t>(axes.size()))
      c.fail("scales has " + std::to_string(given.size()) + " values for " + std::to_string(axes.size()) + " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto a = static_cast<size_t>(axes[k]);
      const double scale = given.get(static_cast<int64_t>(k));
      if (!(scale > 0)) c.fail("scales must be positive");
      scales[a] = scale;
      const double out = std::floor(static_cast<double>(in[a]) * scale);
      if (!(out >= 1 && out <= double(int64_t{1} << 24))) c.fail("scales make an output extent outside [1, 2^24]");
      sizes[a] = static_cast<int64_t>(out);
    }
  } else {
    c.fail("neither scales nor sizes is given");
  }
  if (sizes[0] != in[0] || sizes[1] != in[1])
    c.fail("resizing the batch or channel axis is not supported (sizes " + shape_string(sizes) + " for input " +
           shape_string(in) + ")");
  const std::string coordinates = c.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string rounding = c.attr_string("nearest_mode", "round_prefer_floor");
  c.set_output(0, c.emit("resize", {x},
                         {{"sizes", {sizes[2], sizes[3]}},
                          {"scales", {scales[2], scales[3]}},
                          {"mode", mode},
                          {"coordinate_transformation_mode", coordinates},
                          {"nearest_mode", rounding},
                          {"layout", "NCHW"}}));
}

void import_conv(ImportContext &c) {
  ValueId x = c.input(0), w = c.input(1);
  require_2d_window(c, x);
  const std::vector<int64_t> &ws = c.type(w).shape;
  if (ws.size() != 4) c.fail("weight has shape " + shape_string(ws) + "; expected OIHW");
  std::vector<int64_t> strides = c.attr_ints("strides", {1, 1}), dilations = c.attr_ints("dilations", {1, 1});
  std::vector<int64_t> in = {c.type(x).shape[2], c.type(x).shape[3]};
  std::vector<int64_t> pads = spatial_pads(c, in, {ws[2], ws[3]}, strides, dilations);
  json attrs{{"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"groups", c.attr_int("group", 1)}};
  std::vector<ValueId> inputs = {x, w};
  if (c.has_input(2)) inputs.push_back(c.input(2));
  c.set_output(0, c.emit("conv2d", inputs, attrs));
}

void import_pool(ImportContext &c, const std::string &op) {
  ValueId x = c.input(0);
  require_2d_window(c, x);
  std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {});
  if (kernel.size() != 2) c.fail("kernel_shape must have 2 values");
  std::vector<int64_t> strides = c.attr_ints("strides", {1, 1}), dilations = c.attr_ints("dilations", {1, 1});
  std::vector<int64_t> in = {c.type(x).shape[2], c.type(x).shape[3]};
  std::vector<int64_t> pads = spatial_pads(c, in, kernel, strides, dilations);
  if (c.attr_int("ceil_mode", 0) != 0) {
    // A last, partial window is padded at the end: with the lowest value for the
    // maximum, and left out of the average's divisor. As in ONNX and PyTorch, a window
    // that would start in the end padding is dropped.
    const bool include_pad = op == "avg_pool2d" && c.attr_int("count_include_pad", 0) != 0;
    for (size_t d = 0; d < 2; ++d) {
      int64_t span = in[d] + pads[d] + pads[d + 2] - dilations[d] * (kernel[d] - 1) - 1;
      if (span < 0 || span % strides[d] == 0) continue;
      int64_t out = span / strides[d] + 2;
      if ((out - 1) * strides[d] >= in[d] + pads[d]) --out;
      int64_t extra = (out - 1) * strides[d] + dilations[d] * (kernel[d] - 1) + 1 - (in[d] + pads[d] + pads[d + 2]);
      if (extra <= 0) continue;
      if (include_pad) c.fail("ceil_mode=1 with count_include_pad=1 and a partial last window is not supported");
      pads[d + 2] += extra;
    }
  }
  if (c.attr_int("storage_order", 0) != 0) c.fail("storage_order=1 is not supported");
  c.require_unused_output(1, "Indices");
  json attrs{{"kernel", kernel}, {"strides", strides}, {"pads", pads}, {"dilations", dilations}};
  if (op == "avg_pool2d") attrs["count_include_pad"] = c.attr_int("count_include_pad", 0) != 0;
  c.set_output(0, c.emit(op, {x}, attrs));
}

ValueId reshape(ImportContext &c, ValueId x, const std::vector<int64_t> &shape) {
  if (c.type(x).shape == shape) return x;
  if (c.value(x).is_constant()) {
    // Constants (shape arithmetic) keep their bytes; a scalar result is allowed here.
    const HostTensor &data = *c.value(x).constant;
    HostTensor out(data.dtype(), shape);
    if (out.size() != data.size())
      c.fail("cannot reshape " + shape_string(data.shape()) + " to " + shape_string(shape));
    std::memcpy(out.data(), data.data(), static_cast<size_t>(data.size() * ir::dtype_bytes(data.dtype())));
    return c.constant(std::move(out));
  }
  return c.emit("reshape", {x}, {{"shape", shape}});
}

void import_gemm(ImportContext &c) {
  ValueId a = c.input(0), b = c.input(1);
  if (c.type(a).shape.size() != 2 || c.type(b).shape.size() != 2) c.fail("Gemm needs 2-d A and B");
  bool trans_a = c.attr_int("transA", 0) != 0, trans_b = c.attr_int("transB", 0) != 0;
  double alpha = c.attr_float("alpha", 1.0f), beta = c.attr_float("beta", 1.0f);
  int64_t n = c.type(b).shape[trans_b ? 0 : 1];
  std::optional<ValueId> bias;
  if (c.has_input(2)) bias = c.input(2);
  // A scalar bias (rank 0) broadcasts too, but is no row: only a shape ending in n is.
  bool bias_is_row =
      bias && !c.type(*bias).shape.empty() && product(c.type(*bias).shape) == n && c.type(*bias).shape.back() == n;
  if (!trans_a && trans_b && alpha == 1.0 && (!bias || (beta == 1.0 && bias_is_row))) {
    std::vector<ValueId> inputs = {a, b};
    if (bias) inputs.push_back(reshape(c, *bias, {n}));
    c.set_output(0, c.emit("dense", inputs));
    return;
  }
  DType t = c.type(a).dtype;
  ValueId y = c.emit("matmul", {a, b}, {{"transpose_a", trans_a}, {"transpose_b", trans_b}});
  if (alpha != 1.0) y = c.emit("mul", {y, c.constant(scalar(t, alpha))});
  if (bias) {
    ValueId scaled = beta == 1.0 ? *bias : c.emit("mul", {*bias, c.constant(scalar(t, beta))});
    y = c.emit("add", {y, scaled});
  }
  c.set_output(0, y);
}

// ONNX MatMul (numpy matmul) through Kiln's 2-d matmul and 3-d batch_matmul.
void import_matmul(ImportContext &c) {
  ValueId a = c.input(0), b = c.input(1);
  std::vector<int64_t> sa = c.type(a).shape, sb = c.type(b).shape;
  if (sa.empty() || sb.empty()) c.fail("MatMul of a scalar");
  bool a_vector = sa.size() == 1, b_vector = sb.size() == 1;
  if (a_vector) a = reshape(c, a, sa = {1, sa[0]});
  if (b_vector) b = reshape(c, b, sb = {sb[0], 1});
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (sb[sb.size() - 2] != k) c.fail("inner dimensions differ: " + shape_string(sa) + " x " + shape_string(sb));
  std::vector<int64_t> batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  std::vector<int64_t> out_batch;
  ValueId y;
  if (batch_b.empty() || product(batch_b) == 1) {
    // One B for every row of A: fold A's batch into M, one 2-d product.
    ValueId a2 = reshape(c, a, {product(batch_a) * m, k});
    y = c.emit("matmul", {a2, reshape(c, b, {k, n})});
    out_batch = batch_a.size() >= batch_b.size() ? batch_a : batch_b;
  } else {
    size_t rank = std::max(batch_a.size(), batch_b.size());
    batch_a.insert(batch_a.begin(), rank - batch_a.size(), 1);
    batch_b.insert(batch_b.begin(), rank - batch_b.size(), 1);
    if (product(batch_a) != 1 && batch_a != batch_b)
      c.fail("batch dimensions " + shape_string(batch_a) + " and " + shape_string(batch_b) +
             " broadcast partially, which Kiln does not support");
    out_batch = batch_b;
    ValueId a3 = reshape(c, a, {product(batch_a), m, k});
    ValueId b3 = reshape(c, b, {product(batch_b), k, n});
    y = c.emit("batch_matmul", {a3, b3});
  }
  std::vector<int64_t> out = out_batch;
  if (!a_vector) out.push_back(m);
  if (!b_vector) out.push_back(n);
  c.set_output(0, reshape(c, y, out));
}

// ---- layout -------------------------------------------------------------------------

void import_reshape(ImportContext &c) {
  std::vector<int64_t> shape = c.int_list_input(1, "shape");
  if (c.attr_int("allowzero", 0) != 0 && std::count(shape.begin(), shape.end(), 0) > 0)
    c.fail("allowzero=1 with a 0 in the shape is not supported");
  c.set_output(0, c.emit("reshape", {c.input(0)}, {{"shape", shape}}));
}

std::vector<int64_t> axes_of(ImportContext &c, int input, const std::string &what) {
  if (c.opset() >= 13 && c.has_input(input)) return c.int_list_input(input, what);
  return c.attr_ints("axes", {});
}

void import_squeeze(ImportContext &c) {
  ValueId x = c.input(0);
  const std::vector<int64_t> &in = c.type(x).shape;
  std::vector<int64_t> axes = c.opset() >= 13 ? (c.has_input(1) ? c.int_list_input(1, "axes") : std::vector<int64_t>{})
                                              : c.attr_ints("axes", {});
  std::vector<bool> drop(in.size(), axes.empty());
  for (int64_t a : axes) {
    int64_t d = normalize_axis(c, a, in.size());
    if (in[static_cast<size_t>(d)] != 1)
      c.fail("cannot squeeze axis " + std::to_string(a) + " of extent " + std::to_string(in[static_cast<size_t>(d)]));
    drop[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!(drop[d] && in[d] == 1)) out.push_back(in[d]);
  c.set_output(0, reshape(c, x, out));
}

void import_unsqueeze(ImportContext &c) {
  ValueId x = c.input(0);
  const std::vector<int64_t> &in = c.type(x).shape;
  std::vector<int64_t> axes = c.opset() >= 13 ? c.int_list_input(1, "axes") : c.attr_ints("axes", {});
  size_t rank = in.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    int64_t d = normalize_axis(c, a, rank);
    if (inserted[static_cast<size_t>(d)]) c.fail("axis " + std::to_string(a) + " is given twice");
    inserted[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) out.push_back(inserted[d] ? 1 : in[next++]);
  c.set_output(0, reshape(c, x, out));
}

void import_transpose(ImportContext &c) {
  c.set_output(0, c.emit("transpose", {c.input(0)}, {{"perm", c.attr_ints("perm", {})}}));
}

void import_flatten(ImportContext &c) {
  c.set_output(0, c.emit("flatten", {c.input(0)}, {{"axis", c.attr_int("axis", 1)}}));
}

void import_concat(ImportContext &c) {
  std::vector<ValueId> inputs;
  for (int i = 0; i < c.num_inputs(); ++i) inputs.push_back(c.input(i));
  c.set_output(0, c.emit("concat", inputs, {{"axis", c.attr_int("axis", 0)}}));
}

// Constant padding as a concatenation with constant blocks, axis by axis.
void import_pad(ImportContext &c) {
  if (c.attr_string("mode", "constant") != "constant") c.fail("only mode 'constant' is supported");
  ValueId x = c.input(0);
  size_t rank = c.type(x).shape.size();
  std::vector<int64_t> pads = c.opset() >= 11 ? c.int_list_input(1, "pads") : c.attr_ints("pads", {});
  if (c.has_input(3)) {
    // Opset 18: pads for the listed axes only, [begin of each, end of each].
    std::vector<int64_t> axes = c.int_list_input(3, "axes");
    if (pads.size() != 2 * axes.size()) c.fail("pads needs 2 values per axis in axes");
    std::vector<int64_t> full(2 * rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      auto d = static_cast<size_t>(normalize_axis(c, axes[i], rank));
      full[d] = pads[i];
      full[d + rank] = pads[i + axes.size()];
    }
    pads = full;
  }
  if (pads.size() != 2 * rank) c.fail("pads needs " + std::to_string(2 * rank) + " values");
  double fill = c.has_input(2) ? c.scalar_input(2, "constant_value") : 0.0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t before = pads[d], after = pads[d + rank];
    if (before < 0 || after < 0) c.fail("negative pads (cropping) are not supported");
    if (before == 0 && after == 0) continue;
    std::vector<ValueId> parts;
    auto block = [&](int64_t extent) {
      std::vector<int64_t> shape = c.type(x).shape;
      shape[d] = extent;
      c.check_constant_shape(shape, "a padding block");
      HostTensor t(c.type(x).dtype, shape);
      t.fill(fill);
      return c.constant(std::move(t));
    };
    if (before > 0) parts.push_back(block(before));
    parts.push_back(x);
    if (after > 0) parts.push_back(block(after));
    x = c.emit("concat", parts, {{"axis", static_cast<int64_t>(d)}});
  }
  c.set_output(0, x);
}

// ---- reductions and normalization ---------------------------------------------------

OpImporter reduce(const std::string &op) {
  return [op](ImportContext &c) {
    // ReduceSum takes its axes as an input from opset 13, the others from opset 18.
    std::vector<int64_t> axes = op == "reduce_sum" || c.opset() >= 18 ? axes_of(c, 1, "axes") : c.attr_ints("axes", {});
    if (axes.empty() && c.attr_int("noop_with_empty_axes", 0) != 0) {
      c.set_output(0, c.input(0));
      return;
    }
    c.set_output(0, c.emit(op, {c.input(0)}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1) != 0}}));
  };
}

// The axis of Softmax and LogSoftmax. Before opset 13 they normalize over all axes from
// `axis` on (a 2-d view): the same as over `axis` alone only when the later axes have
// extent 1.
int64_t softmax_axis(ImportContext &c, ValueId x) {
  size_t rank = c.type(x).shape.size();
  int64_t axis = normalize_axis(c, c.attr_int("axis", c.opset() >= 13 ? -1 : 1), rank);
  if (c.opset() < 13) {
    for (size_t d = static_cast<size_t>(axis) + 1; d < rank; ++d)
      if (c.type(x).shape[d] != 1) c.fail("opset < 13 " + c.node().op_type() + " over several axes is not supported");
  }
  return axis;
}

void import_softmax(ImportContext &c) {
  ValueId x = c.input(0);
  c.set_output(0, c.emit("softmax", {x}, {{"axis", softmax_axis(c, x)}}));
}

void import_layer_norm(ImportContext &c) {
  if (c.attr_int("stash_type", 1) != 1) c.fail("only stash_type=1 (float) is supported");
  c.require_unused_output(1, "Mean");
  c.require_unused_output(2, "InvStdDev");
  std::vector<ValueId> inputs = {c.input(0), c.input(1)};
  if (c.has_input(2)) inputs.push_back(c.input(2));
  c.set_output(
      0, c.emit("layer_norm", inputs, {{"axis", c.attr_int("axis", -1)}, {"epsilon", c.attr_float("epsilon", 1e-5f)}}));
}

// Inference BatchNormalization: y = x * s + (B - mean * s), s = scale / sqrt(var + eps),
// with s and the shift constants broadcast over the channel axis.
void import_batch_norm(ImportContext &c) {
  ValueId x = c.input(0);
  const std::vector<int64_t> &shape = c.type(x).shape;
  if (shape.size() < 2) c.fail("input must have a channel axis");
  const HostTensor &scale = c.constant_input(1, "scale"), &bias = c.constant_input(2, "B");
  const HostTensor &mean = c.constant_input(3, "input_mean"), &var = c.constant_input(4, "input_var");
  double eps = c.attr_float("epsilon", 1e-5f);
  for (int i = 1; i < 5; ++i) c.require_unused_output(i, "training statistics");
  int64_t channels = shape[1];
  std::vector<int64_t> bshape(shape.size() - 1, 1);
  bshape[0] = channels;
  HostTensor s(c.type(x).dtype, bshape), shift(c.type(x).dtype, bshape);
  for (const HostTensor *t : {&scale, &bias, &mean, &var})
    if (t->size() != channels) c.fail("scale, B, mean and var need " + std::to_string(channels) + " values");
  for (int64_t k = 0; k < channels; ++k) {
    double factor = scale.get(k) / std::sqrt(var.get(k) + eps);
    s.set(k, factor);
    shift.set(k, bias.get(k) - mean.get(k) * factor);
  }
  ValueId scaled = c.emit("mul", {x, c.constant(std::move(s))});
  c.set_output(0, c.emit("add", {scaled, c.constant(std::move(shift))}));
}

// ---- constants and shape computations -------------------------------------------------

void import_constant(ImportContext &c) {
  if (const onnx::AttributeProto *a = c.attr("value")) {
    c.set_output(0, c.constant(tensor_from_onnx(a->t())));
  } else if (const onnx::AttributeProto *f = c.attr("value_float")) {
    c.set_output(0, c.constant(scalar(DType::kFloat32, f->f())));
  } else if (const onnx::AttributeProto *fs = c.attr("value_floats")) {
    HostTensor t(DType::kFloat32, {fs->floats_size()});
    for (int i = 0; i < fs->floats_size(); ++i) t.set(i, fs->floats(i));
    c.set_output(0, c.constant(std::move(t)));
  } else if (c.has_attr("value_int")) {
    c.set_output(0, c.constant(int64_tensor({c.attr_int("value_int", 0)})));
  } else if (c.has_attr("value_ints")) {
    c.set_output(0, c.constant(int64_tensor(c.attr_ints("value_ints", {}))));
  } else {
    c.fail("needs a value, value_float(s) or value_int(s) attribute (sparse and string values are not supported)");
  }
}

void import_shape(ImportContext &c) {
  const std::vector<int64_t> &shape = c.type(c.input(0)).shape;
  auto rank = static_cast<int64_t>(shape.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  start = clamp(start);
  end = std::max(start, clamp(end));
  c.set_output(0, c.constant(int64_tensor({shape.begin() + start, shape.begin() + end})));
}

void import_constant_of_shape(ImportContext &c) {
  std::vector<int64_t> shape = c.int_list_input(0, "shape");
  HostTensor value = scalar(DType::kFloat32, 0.0);
  if (const onnx::AttributeProto *a = c.attr("value")) value = tensor_from_onnx(a->t());
  c.check_constant_shape(shape, "the output");
  if (value.size() < 1) c.fail("value must hold one element");
  HostTensor out(value.dtype(), shape);
  out.fill(value.get(0));
  c.set_output(0, c.constant(std::move(out)));
}

void import_cast(ImportContext &c) {
  ValueId x = c.input(0);
  DType to = dtype_from_onnx(static_cast<int32_t>(c.attr_int("to", 0)), "Cast's target type");
  if (c.type(x).dtype == to) {
    c.set_output(0, x);
    return;
  }
  if (c.value(x).is_constant()) {
    c.set_output(0, c.constant(cast_tensor(c.constant_input(0, "input"), to)));
    return;
  }
  // A run-time cast (an int64 attention mask made float).
  c.set_output(0, c.emit("cast", {x}, {{"dtype", ir::dtype_name(to)}}));
}

// Gather of constant indices from a computed tensor (a transformer's class token, one
// row of a computed table): a one-element slice per index, joined along the axis, then
// reshaped so the indices' shape takes the axis's place.
void import_gather_computed(ImportContext &c, ValueId data, const HostTensor &indices, int64_t axis) {
  const std::vector<int64_t> ds = c.type(data).shape;  // a copy: emit() adds values
  const int64_t extent = ds[static_cast<size_t>(axis)];
  if (indices.size() == 0) c.fail("no indices: Kiln has no empty tensors");
  std::vector<ValueId> rows;
  for (int64_t i = 0; i < indices.size(); ++i) {
    int64_t at = int_at(indices, i);
    if (at < -extent || at >= extent)
      c.fail("index " + std::to_string(at) + " is out of range for extent " + std::to_string(extent));
    if (at < 0) at += extent;
    std::vector<int64_t> begin(ds.size(), 0), step(ds.size(), 1), shape = ds;
    begin[static_cast<size_t>(axis)] = at;
    shape[static_cast<size_t>(axis)] = 1;
    rows.push_back(c.emit("slice", {data}, {{"begin", begin}, {"step", step}, {"shape", shape}}));
  }
  ValueId joined = rows.size() == 1 ? rows[0] : c.emit("concat", rows, {{"axis", axis}});
  std::vector<int64_t> out_shape(ds.begin(), ds.begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), ds.begin() + axis + 1, ds.end());
  c.set_output(0, c.emit("reshape", {joined}, {{"shape", out_shape}}));
}

void import_gather(ImportContext &c) {
  if (!c.value(c.input(1)).is_constant()) {
    // Indices known only at run time (token ids into an embedding table).
    c.set_output(0, c.emit("take", {c.input(0), c.input(1)}, {{"axis", c.attr_int("axis", 0)}}));
    return;
  }
  const HostTensor &indices = c.constant_input(1, "indices");
  if (!c.value(c.input(0)).is_constant()) {
    import_gather_computed(c, c.input(0), indices,
                           normalize_axis(c, c.attr_int("axis", 0), c.type(c.input(0)).shape.size()));
    return;
  }
  const HostTensor &data = c.constant_input(0, "data");
  int64_t axis = normalize_axis(c, c.attr_int("axis", 0), data.shape().size());
  const std::vector<int64_t> &ds = data.shape();
  std::vector<int64_t> out_shape(ds.begin(), ds.begin() + axis);
  out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
  out_shape.insert(out_shape.end(), ds.begin() + axis + 1, ds.end());
  int64_t outer = product({ds.begin(), ds.begin() + axis}), inner = product({ds.begin() + axis + 1, ds.end()});
  int64_t extent = ds[static_cast<size_t>(axis)];
  c.check_constant_shape(out_shape, "the output");
  HostTensor out(data.dtype(), out_shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < indices.size(); ++i) {
      int64_t at = int_at(indices, i);
      if (at < -extent || at >= extent)
        c.fail("index " + std::to_string(at) + " is out of range for extent " + std::to_string(extent));
      if (at < 0) at += extent;
      for (int64_t r = 0; r < inner; ++r) {
        int64_t dst = (o * indices.size() + i) * inner + r, src = (o * extent + at) * inner + r;
        if (ir::is_int(data.dtype()))
          set_int(out, dst, int_at(data, src));
        else
          out.set(dst, data.get(src));
      }
    }
  c.set_output(0, c.constant(std::move(out)));
}

void import_slice(ImportContext &c) {
  ValueId x = c.input(0);
  std::vector<int64_t> starts = c.int_list_input(1, "starts"), ends = c.int_list_input(2, "ends");
  const std::vector<int64_t> ds = c.type(x).shape;
  std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (c.has_input(3)) axes = c.int_list_input(3, "axes");
  if (c.has_input(4)) steps = c.int_list_input(4, "steps");
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<int64_t> begin(ds.size(), 0), step(ds.size(), 1), out_shape = ds;
  for (size_t i = 0; i < starts.size(); ++i) {
    auto d = static_cast<size_t>(normalize_axis(c, axes[i], ds.size()));
    int64_t n = ds[d], s = steps[i];
    if (s == 0) c.fail("a step is 0");
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
    int64_t b = s > 0 ? clamp(starts[i], 0, n) : clamp(starts[i], -1, n - 1);
    int64_t e = s > 0 ? clamp(ends[i], 0, n) : clamp(ends[i], -1, n - 1);
    begin[d] = b;
    step[d] = s;
    out_shape[d] = s > 0 ? std::max<int64_t>(0, (e - b + s - 1) / s) : std::max<int64_t>(0, (b - e - s - 1) / -s);
  }
  if (!c.value(x).is_constant()) {
    for (int64_t extent : out_shape)
      if (extent == 0) c.fail("the slice of a computed tensor is empty; Kiln has no empty tensors");
    c.set_output(0, c.emit("slice", {x}, {{"begin", begin}, {"step", step}, {"shape", out_shape}}));
    return;
  }
  // Constants (shape arithmetic, position tables) are sliced here, empty results included.
  const HostTensor &data = c.constant_input(0, "data");
  HostTensor out(data.dtype(), out_shape);
  std::vector<int64_t> so = strides_of(out_shape), si = strides_of(ds);
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t src = 0, rest = i;
    for (size_t d = 0; d < ds.size(); ++d) {
      src += (begin[d] + (rest / so[d]) * step[d]) * si[d];
      rest %= so[d];
    }
    if (ir::is_int(data.dtype()))
      set_int(out, i, int_at(data, src));
    else
      out.set(i, data.get(src));
  }
  c.set_output(0, c.constant(std::move(out)));
}

// Expand(x, shape): x * ones(shape) broadcasts exactly (x * 1 keeps -0 and NaN).
void import_expand(ImportContext &c) {
  std::vector<int64_t> shape = c.int_list_input(1, "shape");
  c.check_constant_shape(shape, "the expanded shape");
  HostTensor ones(c.type(c.input(0)).dtype, shape);
  ones.fill(1.0);
  ValueId one = c.constant(std::move(ones));
  ValueId x = c.input(0);
  if (c.value(x).is_constant()) {
    c.set_output(0, c.constant(broadcast_constants(
                        c, *c.value(x).constant, *c.value(one).constant, c.type(x).dtype,
                        [](double a, double) { return a; }, [](int64_t a, int64_t) { return a; })));
    return;
  }
  c.set_output(0, c.emit("mul", {x, one}));
}

void import_identity(ImportContext &c) {
  c.require_unused_output(1, "mask");
  c.set_output(0, c.input(0));
}

// Inference Dropout is the identity; training mode (a true third input) is not.
void import_dropout(ImportContext &c) {
  if (c.has_input(2) && c.scalar_input(2, "training_mode") != 0.0)
    c.fail("training mode is not supported; export the model in eval mode");
  import_identity(c);
}

// ---- shape arithmetic on constants (dynamic exports with --shape) ------------------------

// Range(start, limit, delta) of constant scalars: position ids of a dynamic export.
void import_range(ImportContext &c) {
  const HostTensor &start = c.constant_input(0, "start");
  double first = c.scalar_input(0, "start"), limit = c.scalar_input(1, "limit"), delta = c.scalar_input(2, "delta");
  if (delta == 0) c.fail("delta is 0");
  double steps = std::ceil((limit - first) / delta);
  if (!(steps < double(ImportContext::kMaxConstantElements))) steps = double(ImportContext::kMaxConstantElements) + 1;
  std::vector<int64_t> shape = {std::max<int64_t>(0, static_cast<int64_t>(steps))};
  c.check_constant_shape(shape, "the range");
  HostTensor out(start.dtype(), shape);
  for (int64_t i = 0; i < shape[0]; ++i) {
    if (ir::is_int(start.dtype()))
      set_int(out, i, int_at(start, 0) + i * static_cast<int64_t>(delta));
    else
      out.set(i, first + static_cast<double>(i) * delta);
  }
  c.set_output(0, c.constant(std::move(out)));
}

// Comparisons: of constants (masks and shape checks of dynamic exports) folded, as
// bool; of computed tensors (a mask compared at run time) Kiln's comparison operator.
OpImporter compare(const std::string &op, std::function<bool(double, double)> test) {
  return [op, test](ImportContext &c) {
    if (!c.value(c.input(0)).is_constant() || !c.value(c.input(1)).is_constant()) {
      c.set_output(0, c.emit(op, {c.input(0), c.input(1)}));
      return;
    }
    const HostTensor &a = c.constant_input(0, "A"), &b = c.constant_input(1, "B");
    c.set_output(0, c.constant(broadcast_constants(
                        c, a, b, DType::kBool, [test](double x, double y) { return test(x, y) ? 1.0 : 0.0; },
                        [test](int64_t x, int64_t y) -> int64_t { return test(double(x), double(y)) ? 1 : 0; })));
  };
}

void import_not(ImportContext &c) {
  if (c.type(c.input(0)).dtype != DType::kBool) c.fail("Not needs a bool input");
  if (!c.value(c.input(0)).is_constant()) {
    c.set_output(0, c.emit("logical_not", {c.input(0)}));
    return;
  }
  HostTensor out = c.constant_input(0, "X");
  for (int64_t i = 0; i < out.size(); ++i) out.set(i, out.get(i) != 0 ? 0.0 : 1.0);
  c.set_output(0, c.constant(std::move(out)));
}

// Where(cond, x, y): x where cond holds, else y, all three broadcast. Folded when all
// three are constants; else Kiln's where (an attention mask's masked_fill).
void import_where(ImportContext &c) {
  if (c.type(c.input(1)).dtype != c.type(c.input(2)).dtype) c.fail("X and Y have different element types");
  if (!c.value(c.input(0)).is_constant() || !c.value(c.input(1)).is_constant() || !c.value(c.input(2)).is_constant()) {
    c.set_output(0, c.emit("where", {c.input(0), c.input(1), c.input(2)}));
    return;
  }
  const HostTensor &cond = c.constant_input(0, "condition"), &x = c.constant_input(1, "X"),
                   &y = c.constant_input(2, "Y");
  if (x.dtype() != y.dtype()) c.fail("X and Y have different element types");
  const std::vector<int64_t> out_shape = broadcast_shape(c, broadcast_shape(c, cond.shape(), x.shape()), y.shape());
  c.check_constant_shape(out_shape, "the result");
  auto index_into = [&](const HostTensor &t, const std::vector<int64_t> &at) {
    const std::vector<int64_t> &s = t.shape();
    int64_t flat = 0;
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t i = at[at.size() - s.size() + d];
      flat = flat * s[d] + (s[d] == 1 ? 0 : i);
    }
    return flat;
  };
  HostTensor out(x.dtype(), out_shape);
  std::vector<int64_t> so = strides_of(out_shape), at(out_shape.size());
  for (int64_t i = 0; i < out.size(); ++i) {
    for (size_t d = 0, rest = static_cast<size_t>(i); d < out_shape.size(); ++d) {
      at[d] = static_cast<int64_t>(rest) / so[d];
      rest %= static_cast<size_t>(so[d]);
    }
    const HostTensor &pick = cond.get(index_into(cond, at)) != 0 ? x : y;
    int64_t from = index_into(pick, at);
    if (ir::is_int(out.dtype()))
      set_int(out, i, int_at(pick, from));
    else
      out.set(i, pick.get(from));
  }
  c.set_output(0, c.constant(std::move(out)));
}

// ---- activations composed of Kiln's element-wise operators -----------------------------

ValueId scalar_like(ImportContext &c, ValueId x, double value) { return c.constant(scalar(c.type(x).dtype, value)); }

// min(x, 0): the negative part, which the piecewise activations below scale.
ValueId negative_part(ImportContext &c, ValueId x) { return c.emit("minimum", {x, scalar_like(c, x, 0.0)}); }

// x for x >= 0, alpha * x below: relu(x) + alpha * min(x, 0).
void import_leaky_relu(ImportContext &c) {
  ValueId x = c.input(0);
  ValueId scaled = c.emit("mul", {negative_part(c, x), scalar_like(c, x, c.attr_float("alpha", 0.01f))});
  c.set_output(0, c.emit("add", {c.emit("relu", {x}), scaled}));
}

// PRelu's slope is a tensor broadcast against x (one per channel, usually).
void import_prelu(ImportContext &c) {
  ValueId x = c.input(0), slope = c.input(1);
  if (c.type(slope).dtype != c.type(x).dtype) c.fail("slope and input have different element types");
  c.set_output(0, c.emit("add", {c.emit("relu", {x}), c.emit("mul", {negative_part(c, x), slope})}));
}

// x for x > 0, alpha * (exp(x) - 1) below: relu(x) + alpha * (exp(min(x, 0)) - 1).
void import_elu(ImportContext &c) {
  ValueId x = c.input(0);
  ValueId expm1 = c.emit("sub", {c.emit("exp", {negative_part(c, x)}), scalar_like(c, x, 1.0)});
  ValueId scaled = c.emit("mul", {expm1, scalar_like(c, x, c.attr_float("alpha", 1.0f))});
  c.set_output(0, c.emit("add", {c.emit("relu", {x}), scaled}));
}

// log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)): exp never overflows.
void import_softplus(ImportContext &c) {
  ValueId x = c.input(0);
  ValueId tail = c.emit("exp", {c.emit("neg", {c.emit("abs", {x})})});
  ValueId log1p = c.emit("log", {c.emit("add", {tail, scalar_like(c, x, 1.0)})});
  c.set_output(0, c.emit("add", {c.emit("relu", {x}), log1p}));
}

// x - max - log(sum(exp(x - max))) over the axis: exact where log(softmax) would
// underflow to -inf.
void import_log_softmax(ImportContext &c) {
  ValueId x = c.input(0);
  json over_axis{{"axes", {softmax_axis(c, x)}}, {"keepdims", true}};
  ValueId shifted = c.emit("sub", {x, c.emit("reduce_max", {x}, over_axis)});
  ValueId total = c.emit("reduce_sum", {c.emit("exp", {shifted})}, over_axis);
  c.set_output(0, c.emit("sub", {shifted, c.emit("log", {total})}));
}

// Gelu (opset 20): the exact form is Kiln's gelu; the tanh approximation is composed.
void import_gelu(ImportContext &c) {
  ValueId x = c.input(0);
  std::string approximate = c.attr_string("approximate", "none");
  if (approximate == "none") {
    c.set_output(0, c.emit("gelu", {x}));
    return;
  }
  if (approximate != "tanh") c.fail("approximate '" + approximate + "' is neither none nor tanh");
  // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
  ValueId cube = c.emit("mul", {c.emit("mul", {x, x}), x});
  ValueId inner = c.emit("add", {x, c.emit("mul", {cube, scalar_like(c, x, 0.044715)})});
  ValueId t = c.emit("tanh", {c.emit("mul", {inner, scalar_like(c, x, std::sqrt(2.0 / std::acos(-1.0)))})});
  ValueId half_x = c.emit("mul", {x, scalar_like(c, x, 0.5)});
  c.set_output(0, c.emit("mul", {half_x, c.emit("add", {t, scalar_like(c, x, 1.0)})}));
}

// ---- Split: one slice per output ---------------------------------------------------------

void import_split(ImportContext &c) {
  ValueId x = c.input(0);
  const std::vector<int64_t> shape = c.type(x).shape;
  auto axis = static_cast<size_t>(normalize_axis(c, c.attr_int("axis", 0), shape.size()));
  const int64_t extent = shape[axis];
  const int outputs = c.node().output_size();
  std::vector<int64_t> sizes;
  if (c.opset() >= 13 ? c.has_input(1) : c.has_attr("split")) {
    sizes = c.opset() >= 13 ? c.int_list_input(1, "split") : c.attr_ints("split", {});
    if (static_cast<int>(sizes.size()) != outputs)
      c.fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs) + " outputs");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) c.fail("a split size is negative");
      total += s;
    }
    if (total != extent)
      c.fail("the split sizes add up to " + std::to_string(total) + ", not the axis' extent " + std::to_string(extent));
  } else {
    // Equal parts; from opset 18 num_outputs says how many, the last part may be smaller.
    int64_t parts = c.opset() >= 18 ? c.attr_int("num_outputs", outputs) : outputs;
    if (parts != outputs || parts <= 0) c.fail("num_outputs does not match the node's outputs");
    int64_t each = c.opset() >= 18 ? (extent + parts - 1) / parts : extent / parts;
    if (c.opset() < 18 && extent % parts != 0)
      c.fail("extent " + std::to_string(extent) + " does not split into " + std::to_string(parts) + " equal parts");
    for (int64_t i = 0, left = extent; i < parts; ++i, left -= each) sizes.push_back(std::min(each, left));
  }
  int64_t begin = 0;
  for (int i = 0; i < outputs; ++i) {
    std::vector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1), part = shape;
    starts[axis] = begin;
    part[axis] = sizes[static_cast<size_t>(i)];
    begin += part[axis];
    if (c.node().output(i).empty()) continue;
    if (part[axis] == 0) c.fail("output " + std::to_string(i) + " would be empty; Kiln has no empty tensors");
    c.set_output(i, part == shape ? x : c.emit("slice", {x}, {{"begin", starts}, {"step", steps}, {"shape", part}}));
  }
}

double safe_div(double a, double b) { return a / b; }
int64_t int_div(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }

}  // namespace

const std::map<std::string, OpImporter> &op_importers() {
  static const std::map<std::string, OpImporter> table = [] {
    std::map<std::string, OpImporter> t;
    for (auto [onnx_op, kiln_op] : std::vector<std::pair<const char *, const char *>>{{"Relu", "relu"},
                                                                                      {"Sigmoid", "sigmoid"},
                                                                                      {"Tanh", "tanh"},
                                                                                      {"Exp", "exp"},
                                                                                      {"Sqrt", "sqrt"},
                                                                                      {"Log", "log"},
                                                                                      {"Neg", "neg"},
                                                                                      {"Abs", "abs"},
                                                                                      {"Erf", "erf"}})
      t[onnx_op] = unary(kiln_op);
    t["Add"] = binary({"add", std::plus<double>(), std::plus<int64_t>()});
    t["Sub"] = binary({"sub", std::minus<double>(), std::minus<int64_t>()});
    t["Mul"] = binary({"mul", std::multiplies<double>(), std::multiplies<int64_t>()});
    t["Div"] = binary({"div", safe_div, int_div});
    t["Pow"] = binary({"pow", [](double a, double b) { return std::pow(a, b); },
                       [](int64_t a, int64_t b) { return static_cast<int64_t>(std::pow(a, b)); }});
    t["Max"] = binary({"maximum", [](double a, double b) { return std::max(a, b); },
                       [](int64_t a, int64_t b) { return std::max(a, b); }},
                      true);
    t["Min"] = binary({"minimum", [](double a, double b) { return std::min(a, b); },
                       [](int64_t a, int64_t b) { return std::min(a, b); }},
                      true);
    t["Sum"] = binary({"add", std::plus<double>(), std::plus<int64_t>()}, true);
    t["Clip"] = import_clip;
    t["HardSigmoid"] = [](ImportContext &c) {
      c.set_output(0, hard_sigmoid(c, c.input(0), c.attr_float("alpha", 0.2f), c.attr_float("beta", 0.5f)));
    };
    t["HardSwish"] = [](ImportContext &c) {
      ValueId x = c.input(0);
      c.set_output(0, c.emit("mul", {x, hard_sigmoid(c, x, 1.0 / 6.0, 0.5)}));
    };
    t["Conv"] = import_conv;
    t["Gemm"] = import_gemm;
    t["MatMul"] = import_matmul;
    t["MaxPool"] = [](ImportContext &c) { import_pool(c, "max_pool2d"); };
    t["AveragePool"] = [](ImportContext &c) { import_pool(c, "avg_pool2d"); };
    t["GlobalAveragePool"] = [](ImportContext &c) {
      require_2d_window(c, c.input(0));
      c.set_output(0, c.emit("global_avg_pool2d", {c.input(0)}));
    };
    t["Reshape"] = import_reshape;
    t["Flatten"] = import_flatten;
    t["Squeeze"] = import_squeeze;
    t["Unsqueeze"] = import_unsqueeze;
    t["Transpose"] = import_transpose;
    t["Concat"] = import_concat;
    t["Pad"] = import_pad;
    t["ReduceMean"] = reduce("reduce_mean");
    t["ReduceSum"] = reduce("reduce_sum");
    t["ReduceMax"] = reduce("reduce_max");
    t["ReduceMin"] = reduce("reduce_min");
    t["Softmax"] = import_softmax;
    t["LayerNormalization"] = import_layer_norm;
    t["BatchNormalization"] = import_batch_norm;
    t["Constant"] = import_constant;
    t["Shape"] = import_shape;
    t["ConstantOfShape"] = import_constant_of_shape;
    t["Cast"] = import_cast;
    t["Gather"] = import_gather;
    t["Slice"] = import_slice;
    t["Expand"] = import_expand;
    t["Identity"] = import_identity;
    t["Dropout"] = import_dropout;
    t["LeakyRelu"] = import_leaky_relu;
    t["PRelu"] = import_prelu;
    t["Elu"] = import_elu;
    t["Softplus"] = import_softplus;
    t["LogSoftmax"] = import_log_softmax;
    t["Gelu"] = import_gelu;
    t["Split"] = import_split;
    t["Resize"] = import_resize;
    t["Range"] = import_range;
    t["Equal"] = compare("equal", [](double a, double b) { return a == b; });
    t["Less"] = compare("less", [](double a, double b) { return a < b; });
    t["LessOrEqual"] = compare("less_equal", [](double a, double b) { return a <= b; });
    t["Greater"] = compare("greater", [](double a, double b) { return a > b; });
    t["GreaterOrEqual"] = compare("greater_equal", [](double a, double b) { return a >= b; });
    t["Not"] = import_not;
    t["Where"] = import_where;
    t["Reciprocal"] = [](ImportContext &c) {
      ValueId x = c.input(0);
      c.set_output(0, combine(c, {"div", safe_div, int_div}, scalar_like(c, x, 1.0), x));
    };
    return t;
  }();
  return table;
}

}  // namespace kiln::frontend
