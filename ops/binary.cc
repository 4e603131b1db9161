// Element-wise binary operators with numpy (ONNX multidirectional) broadcasting.
#include <algorithm>
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

std::vector<int64_t> broadcast_shape(std::string_view op, const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; missing leading axes act as extent 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast (axis " + std::to_string(i) +
                   " of the result: " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[i] = std::max(da, db);
  }
  return out;
}

// Indices into `t` for an output position: trailing axes align, broadcast axes read 0.
// An axis of extent 1 in the output too (a batch of one) is indexed by its iterator, not
// 0: the read then names every iterator of the block, which is what inlining a consumer
// into its producer (a residual add into a convolution's write-back) requires.
std::vector<Expr> broadcast_indices(const te::Tensor &t, const std::vector<Var> &out,
                                    const std::vector<int64_t> &out_shape) {
  const size_t lead = out.size() - t.ndim();
  std::vector<Expr> idx;
  for (size_t d = 0; d < t.ndim(); ++d) {
    bool broadcast = t.shape()[d] == 1 && out_shape[lead + d] != 1;
    idx.push_back(broadcast ? Expr(0) : Expr(out[lead + d]));
  }
  return idx;
}

// kComparison: float or integer inputs, a bool result (the comparisons).
enum class Domain { kFloat, kNumeric, kComparison };

OpDef binary(const std::string &name, const std::string &doc, Domain domain,
             std::function<Expr(const Expr &, const Expr &)> fn) {
  std::string summary =
      doc + " Inputs: A, B of the same dtype" + (domain == Domain::kFloat ? " (float)" : " (float or integer)") +
      " whose shapes broadcast like numpy. Output: " + (domain == Domain::kComparison ? "bool, " : "") +
      "the broadcast shape. Stage: " + name + ".";
  auto build = [name, domain, fn](const std::vector<te::Tensor> &in, const json &) {
    const te::Tensor &a = in[0], &b = in[1];
    require_same_dtype(name, a, b);
    if (a.dtype() == DType::kBool) fail(name, "boolean inputs are not supported");
    if (domain == Domain::kFloat) require_float(name, a, "A");
    std::vector<int64_t> shape = broadcast_shape(name, a.shape(), b.shape());
    return te::compute(
        shape,
        [&](const std::vector<Var> &v) {
          return fn(a(broadcast_indices(a, v, shape)), b(broadcast_indices(b, v, shape)));
        },
        name);
  };
  return OpDef{name, summary, 2, 2, json::object(), build};
}

// A comparison of A and B, true or false per element (ONNX Equal, Less, ...).
OpDef comparison(const std::string &name, const std::string &doc, std::function<Expr(const Expr &, const Expr &)> fn) {
  return binary(name, doc, Domain::kComparison, std::move(fn));
}

// X where the condition holds, else Y (ONNX Where of computed tensors: a masked_fill).
te::Tensor where(const std::vector<te::Tensor> &in, const json &) {
  const char *op = "where";
  const te::Tensor &cond = in[0], &x = in[1], &y = in[2];
  if (cond.dtype() != DType::kBool)
    fail(op, "the condition must be bool, got " + std::string(ir::dtype_name(cond.dtype())));
  require_same_dtype(op, x, y);
  if (x.dtype() == DType::kBool) fail(op, "boolean X and Y are not supported");
  std::vector<int64_t> shape = broadcast_shape(op, broadcast_shape(op, cond.shape(), x.shape()), y.shape());
  return te::compute(
      shape,
      [&](const std::vector<Var> &v) {
        return ir::make_select(cond(broadcast_indices(cond, v, shape)), x(broadcast_indices(x, v, shape)),
                               y(broadcast_indices(y, v, shape)));
      },
      op);
}

}  // namespace

std::vector<OpDef> binary_ops() {
  std::vector<OpDef> ops;
  ops.push_back(
      binary("add", "A + B (ONNX Add).", Domain::kNumeric, [](const Expr &a, const Expr &b) { return a + b; }));
  ops.push_back(
      binary("sub", "A - B (ONNX Sub).", Domain::kNumeric, [](const Expr &a, const Expr &b) { return a - b; }));
  ops.push_back(
      binary("mul", "A * B (ONNX Mul).", Domain::kNumeric, [](const Expr &a, const Expr &b) { return a * b; }));
  // Integer ONNX Div truncates toward zero, unlike floordiv; it is left out rather than
  // approximated.
  ops.push_back(binary("div", "A / B (ONNX Div, floating point only).", Domain::kFloat,
                       [](const Expr &a, const Expr &b) { return a / b; }));
  // NaN in either input gives NaN, as ONNX Runtime's Max and Min do: max(a, b) alone is
  // a > b ? a : b, which keeps a NaN in b but drops one in a.
  ops.push_back(binary("maximum", "max(A, B) (ONNX Max with two inputs; NaN in either gives NaN).", Domain::kNumeric,
                       [](const Expr &a, const Expr &b) {
                         if (!ir::is_float(a.dtype())) return ir::make_max(a, b);
                         return ir::make_select(ir::ne(a, a), a, ir::make_max(a, b));
                       }));
  ops.push_back(binary("minimum", "min(A, B) (ONNX Min with two inputs; NaN in either gives NaN).", Domain::kNumeric,
                       [](const Expr &a, const Expr &b) {
                         if (!ir::is_float(a.dtype())) return ir::make_min(a, b);
                         return ir::make_select(ir::ne(a, a), a, ir::make_min(a, b));
                       }));
  ops.push_back(comparison("equal", "A == B (ONNX Equal).", [](const Expr &a, const Expr &b) { return ir::eq(a, b); }));
  ops.push_back(comparison("less", "A < B (ONNX Less).", [](const Expr &a, const Expr &b) { return a < b; }));
  ops.push_back(
      comparison("less_equal", "A <= B (ONNX LessOrEqual).", [](const Expr &a, const Expr &b) { return a <= b; }));
  ops.push_back(comparison("greater", "A > B (ONNX Greater).", [](const Expr &a, const Expr &b) { return a > b; }));
  ops.push_back(comparison("greater_equal", "A >= B (ONNX GreaterOrEqual).",
                           [](const Expr &a, const Expr &b) { return a >= b; }));
  ops.push_back(OpDef{"where",
                      "X where the condition holds, else Y (ONNX Where of computed tensors, e.g. an attention "
                      "mask's masked_fill). Inputs: condition (bool), X, Y of the same dtype (float or integer); "
                      "the three shapes broadcast like numpy. Output: X's dtype, the broadcast shape. Stage: where.",
                      3, 3, json::object(), where});
  ops.push_back(binary("pow", "A ^ B (ONNX Pow); NaN for a negative base with a non-integer exponent.", Domain::kFloat,
                       [](const Expr &a, const Expr &b) {
                         return ir::make_call(ir::Intrinsic::kPow, {a, b});
                       }));
  return ops;
}

}  // namespace kiln::ops::detail
