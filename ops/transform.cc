// Layout transforms: injective stages whose outputs read their input through index
// arithmetic (permutations, floordiv/floormod of a flat offset, piecewise selects).
#include <array>
#include <set>
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

void reject_bool(std::string_view op, const te::Tensor &t) {
  if (t.dtype() == DType::kBool) fail(op, "boolean inputs are not supported");
}

te::Tensor transpose(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "transpose";
  const te::Tensor &x = in[0];
  reject_bool(op, x);
  const size_t rank = x.ndim();
  std::vector<int64_t> perm = attr_ints(attrs, "perm");
  if (perm.empty()) {  // ONNX default: reverse the axes
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != rank)
    fail(op, "perm " + shape_str(perm) + " has " + std::to_string(perm.size()) + " entries for a rank-" +
                 std::to_string(rank) + " input");
  std::vector<bool> seen(rank, false);
  for (int64_t &p : perm) {
    p = normalize_axis(op, p, static_cast<int64_t>(rank), "perm entry");
    if (seen[p]) fail(op, "perm " + shape_str(attr_ints(attrs, "perm")) + " is not a permutation");
    seen[p] = true;
  }
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(x.shape()[p]);
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        // Output axis d is input axis perm[d].
        std::vector<Expr> idx(rank);
        for (size_t d = 0; d < rank; ++d) idx[perm[d]] = v[d];
        return x(idx);
      },
      "transpose");
}

// Reads `x` in row-major order at the flat offset of the output position `v`.
Expr read_flat(const te::Tensor &x, const std::vector<int64_t> &out_shape, const std::vector<Var> &v) {
  Expr flat;
  int64_t stride = 1;
  for (size_t d = out_shape.size(); d-- > 0;) {
    if (out_shape[d] != 1) {
      Expr term = scaled(v[d], stride);
      flat = flat.defined() ? term + flat : term;
    }
    stride *= out_shape[d];
  }
  if (!flat.defined()) flat = Expr(0);
  std::vector<Expr> idx(x.ndim());
  stride = 1;
  for (size_t d = x.ndim(); d-- > 0;) {
    const int64_t extent = x.shape()[d];
    if (extent == 1) {
      idx[d] = Expr(0);
    } else {
      Expr q = stride == 1 ? flat : ir::make_floordiv(flat, Expr(stride));
      // The outermost non-trivial axis needs no modulo: the offset is in range.
      idx[d] = stride * extent == num_elements(x.shape()) ? q : ir::make_floormod(q, Expr(extent));
    }
    stride *= extent;
  }
  return x(idx);
}

// Booleans too: a dynamic dimension's mask is read through a view of another rank when
// the select it feeds is moved past a reshape (sink_reshapes_below_bias).
te::Tensor reshape_to(std::string_view, const te::Tensor &x, const std::vector<int64_t> &shape,
                      const std::string &name) {
  return te::compute(
      shape, [&](const std::vector<Var> &v) { return read_flat(x, shape, v); }, name);
}

te::Tensor reshape(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "reshape";
  const te::Tensor &x = in[0];
  std::vector<int64_t> spec = attr_ints(attrs, "shape");
  if (spec.empty()) fail(op, "attribute 'shape' is required, e.g. {\"shape\": [0, -1]}");
  std::vector<int64_t> shape;
  int64_t known = 1;
  int inferred = -1;
  for (size_t d = 0; d < spec.size(); ++d) {
    int64_t s = spec[d];
    if (s == 0) {  // ONNX (allowzero=0): copy the input's extent
      if (d >= x.ndim())
        fail(op, "shape " + shape_str(spec) + " copies axis " + std::to_string(d) + " (0), but the input " +
                     shape_str(x.shape()) + " has only " + std::to_string(x.ndim()) + " axes");
      s = x.shape()[d];
    } else if (s == -1) {
      if (inferred >= 0) fail(op, "shape " + shape_str(spec) + " has more than one -1");
      inferred = static_cast<int>(d);
      shape.push_back(1);
      continue;
    } else if (s < -1) {
      fail(op, "shape " + shape_str(spec) + " has a negative extent other than -1");
    }
    known *= s;
    shape.push_back(s);
  }
  const int64_t total = num_elements(x.shape());
  if (inferred >= 0) {
    if (total % known != 0)
      fail(op, "cannot infer the -1 in " + shape_str(spec) + ": " + std::to_string(total) +
                   " elements are not divisible by " + std::to_string(known));
    shape[inferred] = total / known;
  }
  if (num_elements(shape) != total)
    fail(op, "cannot reshape " + shape_str(x.shape()) + " (" + std::to_string(total) + " elements) into " +
                 shape_str(shape) + " (" + std::to_string(num_elements(shape)) + " elements)");
  return reshape_to(op, x, shape, "reshape");
}

te::Tensor flatten(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "flatten";
  const te::Tensor &x = in[0];
  const int64_t rank = static_cast<int64_t>(x.ndim());
  int64_t axis = attr_int(attrs, "axis");
  // Unlike most axes, flatten's may equal the rank (everything goes to the outer extent).
  if (axis < -rank || axis > rank)
    fail(op, "axis " + std::to_string(axis) + " is out of range for a rank-" + std::to_string(rank) +
                 " input; expected [" + std::to_string(-rank) + ", " + std::to_string(rank) + "]");
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x.shape()[d];
  return reshape_to(op, x, {outer, inner}, "flatten");
}

te::Tensor concat(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "concat";
  const te::Tensor &first = in[0];
  const size_t rank = first.ndim();
  const auto axis = static_cast<size_t>(normalize_axis(op, attr_int(attrs, "axis"), static_cast<int64_t>(rank)));
  std::vector<int64_t> starts;  // offset of each input along the axis
  int64_t total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    reject_bool(op, in[i]);
    if (in[i].dtype() != first.dtype())
      fail(op, "input " + std::to_string(i) + " has dtype " + ir::dtype_name(in[i].dtype()) + " but input 0 has " +
                   ir::dtype_name(first.dtype()));
    bool compatible = in[i].ndim() == rank;
    for (size_t d = 0; compatible && d < rank; ++d) compatible = d == axis || in[i].shape()[d] == first.shape()[d];
    if (!compatible)
      fail(op, "input " + std::to_string(i) + " has shape " + shape_str(in[i].shape()) + ", which does not match " +
                   shape_str(first.shape()) + " outside axis " + std::to_string(axis));
    starts.push_back(total);
    total += in[i].shape()[axis];
  }
  std::vector<int64_t> shape = first.shape();
  shape[axis] = total;
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        // Piecewise: the last input is the fallback, earlier ones are chosen by range
        // checks from the back. Only the chosen load is evaluated, so the others' out-of
        // -range indices are never read.
        auto load = [&](size_t i) {
          std::vector<Expr> idx = to_exprs(v);
          idx[axis] = offset(v[axis], -starts[i]);
          return in[i](idx);
        };
        Expr value = load(in.size() - 1);
        for (size_t i = in.size() - 1; i-- > 0;) value = ir::make_select(v[axis] < Expr(starts[i + 1]), load(i), value);
        return value;
      },
      "concat");
}

te::Tensor slice(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "slice";
  const te::Tensor &x = in[0];
  reject_bool(op, x);
  const size_t rank = x.ndim();
  const std::vector<int64_t> begin = attr_ints(op, attrs, "begin", rank), step = attr_ints(op, attrs, "step", rank),
                             shape = attr_ints(op, attrs, "shape", rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = x.shape()[d], last = begin[d] + (shape[d] - 1) * step[d];
    if (step[d] == 0) fail(op, "step " + shape_str(step) + " has a 0 at axis " + std::to_string(d));
    if (shape[d] < 1) fail(op, "shape " + shape_str(shape) + " has an empty axis " + std::to_string(d));
    if (begin[d] < 0 || begin[d] >= n || last < 0 || last >= n)
      fail(op, "axis " + std::to_string(d) + " reads elements " + std::to_string(begin[d]) + " to " +
                   std::to_string(last) + " of an input extent " + std::to_string(n));
  }
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < rank; ++d) idx.push_back(offset(scaled(v[d], step[d]), begin[d]));
        return x(idx);
      },
      "slice");
}

// ONNX Gather with run-time indices (an embedding lookup): output position
// [a..., i..., b...] reads x[a..., indices[i...], b...]. Negative indices count from the
// end; an index outside [-n, n) is clamped into the axis, so that no index a model is fed
// reads outside x (the executor refuses such inputs before running where it can see
// them: Model::run checks graph inputs that are indices).
te::Tensor take(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "take";
  const te::Tensor &x = in[0], &indices = in[1];
  reject_bool(op, x);
  if (indices.dtype() != DType::kInt64 && indices.dtype() != DType::kInt32)
    fail(op, "indices must be int64 or int32, not " + std::string(ir::dtype_name(indices.dtype())));
  const size_t rank = x.ndim();
  if (rank == 0) fail(op, "the data must have at least one axis");
  const auto axis =
      static_cast<size_t>(normalize_axis(op, attr_int(attrs, "axis"), static_cast<int64_t>(rank), "axis"));
  const int64_t n = x.shape()[axis];
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + static_cast<int64_t>(axis));
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), x.shape().begin() + static_cast<int64_t>(axis) + 1, x.shape().end());
  const size_t k = indices.ndim();
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        std::vector<Expr> at;
        for (size_t d = 0; d < k; ++d) at.push_back(v[axis + d]);
        Expr i = ir::make_cast(DType::kInt64, indices(at));
        Expr wrapped = ir::make_select(i < Expr(0), i + Expr(n), i);
        Expr clamped = ir::make_min(ir::make_max(wrapped, Expr(0)), Expr(n - 1));
        std::vector<Expr> idx;
        for (size_t d = 0; d < axis; ++d) idx.push_back(v[d]);
        idx.push_back(clamped);
        for (size_t d = axis + 1; d < rank; ++d) idx.push_back(v[d + k - 1]);
        return x(idx);
      },
      op);
}

// The source coordinate of output position `out` along an axis resized from `in_len` to
// `out_len` with scale `scale` (ONNX Resize's coordinate_transformation_mode).
Expr source_coordinate(const std::string &mode, const Expr &out, int64_t in_len, int64_t out_len, double scale) {
  Expr x = ir::make_cast(DType::kFloat32, out);
  auto f = [](double v) { return ir::make_float(v); };
  if (mode == "asymmetric") return x / f(scale);
  if (mode == "align_corners")
    return out_len == 1 ? f(0) : x * f(static_cast<double>(in_len - 1) / static_cast<double>(out_len - 1));
  if (mode == "pytorch_half_pixel" && out_len == 1) return f(0);
  return (x + f(0.5)) / f(scale) - f(0.5);  // half_pixel, pytorch_half_pixel
}

Expr clamp_index(const Expr &i, int64_t len) { return ir::make_min(ir::make_max(i, Expr(0)), Expr(len - 1)); }

Expr floor_index(const Expr &x) { return ir::make_cast(DType::kInt64, ir::make_call(ir::Intrinsic::kFloor, {x})); }

// Resizes the two spatial axes of an image (ONNX Resize of a 4-D tensor whose batch and
// channel scales are 1): nearest (with ONNX's four rounding modes) or bilinear, the
// source coordinate by ONNX's coordinate transformations; neighbours outside the image
// are clamped to its edge, as ONNX's reference does.
te::Tensor resize(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "resize";
  const te::Tensor &x = in[0];
  reject_bool(op, x);
  if (x.ndim() != 4) fail(op, "the input must be 4-D (N, C, H, W or N, H, W, C), got rank " + std::to_string(x.ndim()));
  const std::string layout = attr_string(attrs, "layout"), mode = attr_string(attrs, "mode"),
                    coordinates = attr_string(attrs, "coordinate_transformation_mode"),
                    rounding = attr_string(attrs, "nearest_mode");
  if (layout != "NCHW" && layout != "NHWC") fail(op, "layout must be NCHW or NHWC, got '" + layout + "'");
  if (mode != "nearest" && mode != "linear") fail(op, "mode must be nearest or linear, got '" + mode + "'");
  if (mode == "linear" && !ir::is_float(x.dtype())) fail(op, "linear mode needs a float input");
  static const std::set<std::string> kCoordinates = {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"};
  if (!kCoordinates.count(coordinates))
    fail(op, "coordinate_transformation_mode '" + coordinates +
                 "' is not supported (half_pixel, pytorch_half_pixel, asymmetric, align_corners are)");
  static const std::set<std::string> kRounding = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (!kRounding.count(rounding)) fail(op, "nearest_mode '" + rounding + "' is not one of ONNX's four");
  const std::vector<int64_t> sizes = attr_ints(op, attrs, "sizes", 2);
  if (!attrs.contains("scales") || !attrs["scales"].is_array() || attrs["scales"].size() != 2)
    fail(op, "scales must list 2 numbers (height, width)");
  std::array<double, 2> scales{};
  for (size_t d = 0; d < 2; ++d) {
    if (!attrs["scales"][d].is_number() || !(attrs["scales"][d].get<double>() > 0))
      fail(op, "scales must be positive numbers");
    scales[d] = attrs["scales"][d].get<double>();
    if (sizes[d] < 1 || sizes[d] > (int64_t{1} << 24))
      fail(op, "sizes must lie in [1, 2^24], got " + std::to_string(sizes[d]));
  }
  const std::array<size_t, 2> axes = layout == "NHWC" ? std::array<size_t, 2>{1, 2} : std::array<size_t, 2>{2, 3};
  std::vector<int64_t> shape = x.shape();
  for (size_t d = 0; d < 2; ++d) shape[axes[d]] = sizes[d];
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        std::array<Expr, 2> coordinate;
        for (size_t d = 0; d < 2; ++d)
          coordinate[d] = source_coordinate(coordinates, v[axes[d]], x.shape()[axes[d]], sizes[d], scales[d]);
        auto at = [&](const Expr &row, const Expr &column) {
          std::vector<Expr> idx(v.begin(), v.end());
          idx[axes[0]] = row;
          idx[axes[1]] = column;
          return x(idx);
        };
        if (mode == "nearest") {
          std::array<Expr, 2> index;
          for (size_t d = 0; d < 2; ++d) {
            const Expr &c = coordinate[d];
            Expr rounded =
                rounding == "floor"  ? floor_index(c)
                : rounding == "ceil" ? ir::make_cast(DType::kInt64, ir::make_call(ir::Intrinsic::kCeil, {c}))
                : rounding == "round_prefer_ceil"
                    ? floor_index(c + ir::make_float(0.5))
                    : ir::make_cast(DType::kInt64, ir::make_call(ir::Intrinsic::kCeil, {c - ir::make_float(0.5)}));
            index[d] = clamp_index(rounded, x.shape()[axes[d]]);
          }
          return at(index[0], index[1]);
        }
        std::array<Expr, 2> low, high, weight;
        for (size_t d = 0; d < 2; ++d) {
          Expr below = ir::make_call(ir::Intrinsic::kFloor, {coordinate[d]});
          Expr i = ir::make_cast(DType::kInt64, below);
          low[d] = clamp_index(i, x.shape()[axes[d]]);
          high[d] = clamp_index(i + Expr(1), x.shape()[axes[d]]);
          weight[d] = ir::make_cast(x.dtype(), coordinate[d] - below);
        }
        Expr one = ir::make_const(x.dtype(), 1.0);
        Expr top = at(low[0], low[1]) * (one - weight[1]) + at(low[0], high[1]) * weight[1];
        Expr bottom = at(high[0], low[1]) * (one - weight[1]) + at(high[0], high[1]) * weight[1];
        return top * (one - weight[0]) + bottom * weight[0];
      },
      op);
}

}  // namespace

std::vector<OpDef> transform_ops() {
  std::vector<OpDef> ops;
  ops.push_back(OpDef{"transpose",
                      "Permutes axes (ONNX Transpose). Input: x of any rank and non-boolean dtype. Attribute: perm "
                      "(output axis d is input axis perm[d]; empty = reverse). Stage: transpose.",
                      1, 1, json{{"perm", json::array()}}, transpose});
  ops.push_back(OpDef{"reshape",
                      "Same elements in row-major order, new shape (ONNX Reshape, allowzero=0). Input: x. "
                      "Attribute: shape (required; 0 copies the input extent at that position, one -1 is "
                      "inferred). Stage: reshape (floordiv/floormod of the flat offset).",
                      1, 1, json{{"shape", json::array()}}, reshape});
  ops.push_back(OpDef{"flatten",
                      "Reshapes to 2-d [prod(shape[:axis]), prod(shape[axis:])] (ONNX Flatten). Input: x. "
                      "Attribute: axis (1; in [-rank, rank]). Stage: flatten.",
                      1, 1, json{{"axis", 1}}, flatten});
  ops.push_back(OpDef{"concat",
                      "Joins one or more inputs along an axis (ONNX Concat). Inputs: same dtype and rank, equal "
                      "extents except along axis. Attribute: axis (0; negatives count from the end). Stage: "
                      "concat (nested selects on the axis index).",
                      1, -1, json{{"axis", 0}}, concat});
  ops.push_back(OpDef{"resize",
                      "Resizes an image's height and width (ONNX Resize with batch and channel scales 1). Input: "
                      "4-D x. Attributes: sizes (output height, width), scales (height, width: what the "
                      "coordinate transformation divides by), mode (nearest | linear), "
                      "coordinate_transformation_mode (half_pixel | pytorch_half_pixel | asymmetric | "
                      "align_corners), nearest_mode (round_prefer_floor | round_prefer_ceil | floor | ceil), layout "
                      "(NCHW | NHWC). Neighbours outside the image are clamped to its edge. Stage: resize.",
                      1, 1,
                      json{{"sizes", json::array()},
                           {"scales", {1.0, 1.0}},
                           {"mode", "nearest"},
                           {"coordinate_transformation_mode", "half_pixel"},
                           {"nearest_mode", "round_prefer_floor"},
                           {"layout", "NCHW"}},
                      resize});
  ops.push_back(OpDef{"take",
                      "Rows of x at run-time indices (ONNX Gather with computed indices: embedding lookups). "
                      "Inputs: x of any non-boolean dtype, indices (int64 or int32, any shape). Attribute: axis "
                      "(0). Output: x's shape with the axis replaced by the indices' shape. Negative indices count "
                      "from the end; out-of-range ones are clamped into the axis (never a read outside x). Stage: "
                      "take.",
                      2, 2, json{{"axis", 0}}, take});
  ops.push_back(OpDef{"slice",
                      "Every step-th element from begin, shape elements per axis (ONNX Slice with its starts, ends, "
                      "axes and steps resolved per axis; Gather of constant indices). Input: x. Attributes: begin, "
                      "step (non-zero; negative walks backwards) and shape (at least 1), one per axis, all read "
                      "elements inside x. Stage: slice.",
                      1, 1, json{{"begin", json::array()}, {"step", json::array()}, {"shape", json::array()}}, slice});
  return ops;
}

}  // namespace kiln::ops::detail
