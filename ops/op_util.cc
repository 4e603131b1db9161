#include "ops/op_util.h"

#include <sstream>

namespace kiln::ops::detail {

void fail(std::string_view op, const std::string &message) { throw OpError(std::string(op) + ": " + message); }

std::string shape_str(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

int64_t num_elements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t attr_int(const json &attrs, const char *name) { return attrs.at(name).get<int64_t>(); }
double attr_float(const json &attrs, const char *name) { return attrs.at(name).get<double>(); }
bool attr_bool(const json &attrs, const char *name) { return attrs.at(name).get<bool>(); }
std::string attr_string(const json &attrs, const char *name) { return attrs.at(name).get<std::string>(); }
std::vector<int64_t> attr_ints(const json &attrs, const char *name) {
  return attrs.at(name).get<std::vector<int64_t>>();
}

std::vector<int64_t> attr_ints(std::string_view op, const json &attrs, const char *name, size_t length) {
  std::vector<int64_t> v = attr_ints(attrs, name);
  if (v.size() != length)
    fail(op, std::string("attribute '") + name + "' needs " + std::to_string(length) + " values, got " +
                 std::to_string(v.size()) + " (" + shape_str(v) + ")");
  // Window geometry (kernels, strides, pads, dilations): larger values mean nothing for
  // an image and would overflow the output-size arithmetic.
  constexpr int64_t kLimit = int64_t{1} << 31;
  for (int64_t x : v) {
    if (x > kLimit || x < -kLimit)
      fail(op, std::string("attribute '") + name + "' value " + std::to_string(x) + " is out of range; expected " +
                   "magnitudes up to 2^31");
  }
  return v;
}

int64_t normalize_axis(std::string_view op, int64_t axis, int64_t rank, const char *what) {
  if (axis < -rank || axis >= rank)
    fail(op, std::string(what) + " " + std::to_string(axis) + " is out of range for a rank-" + std::to_string(rank) +
                 " input; expected [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) + "]");
  return axis < 0 ? axis + rank : axis;
}

void require_float(std::string_view op, const te::Tensor &t, const char *role) {
  if (!ir::is_float(t.dtype()))
    fail(op, std::string(role) + " has dtype " + ir::dtype_name(t.dtype()) +
                 "; this operator needs a floating-point tensor (float32 or float16)");
}

void require_same_dtype(std::string_view op, const te::Tensor &a, const te::Tensor &b) {
  if (a.dtype() != b.dtype())
    fail(op, std::string("inputs have different dtypes (") + ir::dtype_name(a.dtype()) + " and " +
                 ir::dtype_name(b.dtype()) + "); insert a cast");
}

void require_rank(std::string_view op, const te::Tensor &t, size_t rank, const char *role) {
  if (t.ndim() != rank)
    fail(op, std::string(role) + " must have rank " + std::to_string(rank) + ", got shape " + shape_str(t.shape()));
}

DType accumulate_dtype(DType input) {
  if (input == DType::kInt8) return DType::kInt32;
  if (input == DType::kBFloat16) return DType::kFloat32;
  return input;
}

Expr scaled(const Expr &x, int64_t factor) { return factor == 1 ? x : x * Expr(factor); }
Expr offset(const Expr &x, int64_t delta) { return delta == 0 ? x : x + Expr(delta); }

std::vector<Expr> to_exprs(const std::vector<Var> &vars) { return {vars.begin(), vars.end()}; }

ImageLayout parse_image_layout(std::string_view op, const json &attrs) {
  std::string layout = attr_string(attrs, "layout");
  if (layout == "NCHW") return ImageLayout{false};
  if (layout == "NHWC") return ImageLayout{true};
  fail(op, "layout '" + layout + "' is not supported; expected \"NCHW\" or \"NHWC\"");
}

te::Tensor pad_image(const te::Tensor &data, ImageLayout layout, const std::vector<int64_t> &pads,
                     const Expr &pad_value) {
  const int64_t top = pads[0], left = pads[1], bottom = pads[2], right = pads[3];
  if (top == 0 && left == 0 && bottom == 0 && right == 0) return data;
  const size_t h = layout.h_axis(), w = layout.w_axis();
  const int64_t height = data.shape()[h], width = data.shape()[w];
  std::vector<int64_t> shape = data.shape();
  shape[h] += top + bottom;
  shape[w] += left + right;
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        // Only the sides that actually pad get a bound check. The interpreter and
        // codegen evaluate only the chosen side of a select, so the load is never out of
        // bounds.
        Expr in_bounds;
        auto require = [&](Expr cond) { in_bounds = in_bounds.defined() ? (in_bounds && cond) : cond; };
        if (top > 0) require(v[h] >= Expr(top));
        if (top > 0 || bottom > 0) require(v[h] < Expr(top + height));
        if (left > 0) require(v[w] >= Expr(left));
        if (left > 0 || right > 0) require(v[w] < Expr(left + width));
        std::vector<Expr> idx = to_exprs(v);
        idx[h] = offset(v[h], -top);
        idx[w] = offset(v[w], -left);
        return ir::make_select(in_bounds, data(idx), ir::make_cast(data.dtype(), pad_value));
      },
      "pad");
}

te::Tensor add_channel_bias(std::string_view op, const te::Tensor &out, const te::Tensor &bias, size_t channel_axis) {
  const int64_t channels = out.shape()[channel_axis];
  if (bias.ndim() != 1 || bias.shape()[0] != channels)
    fail(op, "bias must have shape [" + std::to_string(channels) + "] (one value per output channel), got " +
                 shape_str(bias.shape()));
  if (bias.dtype() != out.dtype())
    fail(op, std::string("bias has dtype ") + ir::dtype_name(bias.dtype()) + " but the output is " +
                 ir::dtype_name(out.dtype()));
  return te::compute(
      out.shape(), [&](const std::vector<Var> &v) { return out(to_exprs(v)) + bias(v[channel_axis]); }, "bias_add");
}

}  // namespace kiln::ops::detail
