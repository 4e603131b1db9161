// Element-wise unary operators: one injective stage each, named after the operator, so
// that auto-inline can fold them into their producer or consumer.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

using ir::Intrinsic;

constexpr double kInvSqrt2 = 0.70710678118654752440;

enum class Domain { kFloat, kNumeric };

te::Tensor elementwise(const std::string &op, const te::Tensor &x, Domain domain,
                       const std::function<Expr(const Expr &)> &fn) {
  if (domain == Domain::kFloat) require_float(op, x, "input");
  if (x.dtype() == DType::kBool) fail(op, "boolean inputs are not supported");
  return te::compute(
      x.shape(), [&](const std::vector<Var> &v) { return fn(x(to_exprs(v))); }, op);
}

Expr intrinsic(Intrinsic f, const Expr &x) { return ir::make_call(f, {x}); }

// A bound of clip as a constant of x's dtype; integer types clamp the bound into their
// range first so that the default +-FLT_MAX bounds stay meaningful.
Expr clip_bound(double value, DType t) {
  if (ir::is_float(t)) return ir::make_float(value, t);
  double lo = t == DType::kInt8 ? -128.0 : static_cast<double>(std::numeric_limits<int32_t>::min());
  double hi = t == DType::kInt8 ? 127.0 : static_cast<double>(std::numeric_limits<int32_t>::max());
  if (t == DType::kInt64) {
    lo = -9.2e18;
    hi = 9.2e18;
  }
  return ir::make_int(static_cast<int64_t>(std::clamp(value, lo, hi)), t);
}

OpDef unary(const std::string &name, const std::string &doc, Domain domain, std::function<Expr(const Expr &)> fn) {
  std::string summary = doc + " Input: any-shape tensor x" +
                        (domain == Domain::kFloat ? " (float)" : " (float or integer)") +
                        "; output has x's shape and dtype. Stage: " + name + ".";
  return OpDef{
      name, summary, 1, 1, json::object(), [name, domain, fn](const std::vector<te::Tensor> &in, const json &) {
        return elementwise(name, in[0], domain, fn);
      }};
}

te::Tensor clip(const std::vector<te::Tensor> &in, const json &attrs) {
  const double lo = attr_float(attrs, "min"), hi = attr_float(attrs, "max");
  if (lo > hi) fail("clip", "min (" + std::to_string(lo) + ") is greater than max (" + std::to_string(hi) + ")");
  const DType t = in[0].dtype();
  return elementwise("clip", in[0], Domain::kNumeric, [&](const Expr &x) {
    // The bound first: max(a, b) is a > b ? a : b, so NaN in x stays NaN (ONNX Clip).
    return ir::make_min(clip_bound(hi, t), ir::make_max(clip_bound(lo, t), x));
  });
}

// Converts every element (ONNX Cast between Kiln's types): float to integer truncates
// towards zero. A float outside the integer type's range (or NaN) gives an unspecified
// value, as ONNX leaves it undefined.
te::Tensor cast(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "cast";
  DType to;
  try {
    to = ir::parse_dtype(attr_string(attrs, "dtype"));
  } catch (const std::invalid_argument &e) {
    fail(op, e.what());
  }
  const te::Tensor &x = in[0];
  // To bool: nonzero is true (NaN too, as ONNX says); from bool: 1 or 0.
  if (to == DType::kBool)
    return te::compute(
        x.shape(),
        [&](const std::vector<Var> &v) {
          Expr e = x(to_exprs(v));
          return x.dtype() == DType::kBool ? e : ir::ne(e, ir::make_const(x.dtype(), 0.0));
        },
        op);
  return te::compute(
      x.shape(), [&](const std::vector<Var> &v) { return ir::make_cast(to, x(to_exprs(v))); }, op);
}

// true where x is false (ONNX Not).
te::Tensor logical_not(const std::vector<te::Tensor> &in, const json &) {
  const te::Tensor &x = in[0];
  if (x.dtype() != DType::kBool)
    fail("logical_not", "the input must be bool, got " + std::string(ir::dtype_name(x.dtype())));
  return te::compute(
      x.shape(), [&](const std::vector<Var> &v) { return !x(to_exprs(v)); }, "logical_not");
}

}  // namespace

std::vector<OpDef> unary_ops() {
  std::vector<OpDef> ops;
  // max(0, x), not max(x, 0): max(a, b) is a > b ? a : b, so NaN stays NaN (ONNX Relu),
  // and it is still one vmaxps / fmax.
  ops.push_back(unary("relu", "max(x, 0) (ONNX Relu; NaN stays NaN).", Domain::kNumeric,
                      [](const Expr &x) { return ir::make_max(ir::make_const(x.dtype(), 0), x); }));
  const double flt_max = std::numeric_limits<float>::max();
  ops.push_back(OpDef{"cast",
                      "Each element converted to dtype (ONNX Cast of a computed tensor; float to integer "
                      "truncates towards zero; to bool, nonzero is true; from bool, 1 or 0). Input: any-shape "
                      "tensor x. Attribute: dtype (float32, float16, int64, int32, int8, bool); a float outside the "
                      "integer type's range gives an unspecified value. Output has x's shape. Stage: cast.",
                      1, 1, json{{"dtype", "float32"}}, cast});
  ops.push_back(OpDef{"logical_not",
                      "true where x is false (ONNX Not of a computed tensor). Input: any-shape bool tensor x. "
                      "Output: bool, x's shape. Stage: logical_not.",
                      1, 1, json::object(), logical_not});
  ops.push_back(OpDef{"clip",
                      "min(max(x, min), max) (ONNX Clip with constant bounds). Input: any-shape tensor x (float "
                      "or integer). Attributes: min (-FLT_MAX), max (FLT_MAX); integer inputs clamp the bounds "
                      "into their range. Output has x's shape and dtype. Stage: clip.",
                      1, 1, json{{"min", -flt_max}, {"max", flt_max}}, clip});
  ops.push_back(unary("sigmoid", "1 / (1 + exp(-x)) (ONNX Sigmoid).", Domain::kFloat,
                      [](const Expr &x) { return intrinsic(Intrinsic::kSigmoid, x); }));
  ops.push_back(unary("tanh", "tanh(x) (ONNX Tanh).", Domain::kFloat,
                      [](const Expr &x) { return intrinsic(Intrinsic::kTanh, x); }));
  ops.push_back(unary("erf", "The Gauss error function (ONNX Erf).", Domain::kFloat,
                      [](const Expr &x) { return intrinsic(Intrinsic::kErf, x); }));
  ops.push_back(unary(
      "gelu", "0.5 * x * (1 + erf(x / sqrt(2))), the exact (erf) form (ONNX Gelu, approximate=none).", Domain::kFloat,
      [](const Expr &x) { return Expr(0.5) * x * (Expr(1.0) + intrinsic(Intrinsic::kErf, x * Expr(kInvSqrt2))); }));
  ops.push_back(
      unary("exp", "e^x (ONNX Exp).", Domain::kFloat, [](const Expr &x) { return intrinsic(Intrinsic::kExp, x); }));
  ops.push_back(unary("sqrt", "Square root (ONNX Sqrt); NaN for negative x.", Domain::kFloat,
                      [](const Expr &x) { return intrinsic(Intrinsic::kSqrt, x); }));
  ops.push_back(unary("log", "Natural logarithm (ONNX Log); NaN for negative x.", Domain::kFloat,
                      [](const Expr &x) { return intrinsic(Intrinsic::kLog, x); }));
  ops.push_back(unary("neg", "-x (ONNX Neg).", Domain::kNumeric, [](const Expr &x) { return Expr(0) - x; }));
  ops.push_back(
      unary("abs", "|x| (ONNX Abs).", Domain::kNumeric, [](const Expr &x) { return intrinsic(Intrinsic::kAbs, x); }));
  return ops;
}

}  // namespace kiln::ops::detail
