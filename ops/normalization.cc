// Normalisations built from several stages: softmax and layer normalisation. Their
// statistics stages keep the reduced axes with extent 1 so every stage has the input's
// rank and index expressions stay one-to-one.
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

using ir::Intrinsic;
using ir::IterVar;

// Indices into x for a statistics position `v` (reduced axes have extent 1) and the
// reduce variables that walk axes [first, rank).
std::vector<Expr> with_reduced(const std::vector<Var> &v, const std::vector<IterVar> &reduce, size_t first) {
  std::vector<Expr> idx = to_exprs(v);
  for (size_t k = 0; k < reduce.size(); ++k) idx[first + k] = reduce[k].var;
  return idx;
}

// Index into a statistics tensor from a full-rank position: reduced axes read 0.
std::vector<Expr> stat_index(const std::vector<Var> &v, size_t first, size_t last) {
  std::vector<Expr> idx = to_exprs(v);
  for (size_t d = first; d < last; ++d) idx[d] = Expr(0);
  return idx;
}

te::Tensor softmax(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "softmax";
  const te::Tensor &x = in[0];
  require_float(op, x, "input");
  const auto axis = static_cast<size_t>(normalize_axis(op, attr_int(attrs, "axis"), static_cast<int64_t>(x.ndim())));
  std::vector<int64_t> stat_shape = x.shape();
  stat_shape[axis] = 1;
  IterVar rmax = te::reduce_axis(x.shape()[axis], "rk");
  te::Tensor max = te::compute(
      stat_shape, [&](const std::vector<Var> &v) { return te::max_of(x(with_reduced(v, {rmax}, axis)), {rmax}); },
      "softmax_max");
  IterVar rsum = te::reduce_axis(x.shape()[axis], "rk");
  te::Tensor expsum = te::compute(
      stat_shape,
      [&](const std::vector<Var> &v) {
        Expr shifted = x(with_reduced(v, {rsum}, axis)) - max(to_exprs(v));
        return te::sum(ir::make_call(Intrinsic::kExp, {shifted}), {rsum});
      },
      "softmax_expsum");
  // The exponential is recomputed here rather than stored by its own stage: it saves a
  // buffer the size of the input and keeps the last stage element-wise, so it can be
  // fused into consumers.
  return te::compute(
      x.shape(),
      [&](const std::vector<Var> &v) {
        std::vector<Expr> s = stat_index(v, axis, axis + 1);
        return ir::make_call(Intrinsic::kExp, {x(to_exprs(v)) - max(s)}) / expsum(s);
      },
      "softmax_norm");
}

te::Tensor layer_norm(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "layer_norm";
  const te::Tensor &x = in[0], &gamma = in[1];
  require_float(op, x, "x");
  const size_t rank = x.ndim();
  const auto axis = static_cast<size_t>(normalize_axis(op, attr_int(attrs, "axis"), static_cast<int64_t>(rank)));
  const double epsilon = attr_float(attrs, "epsilon");
  if (!(epsilon >= 0)) fail(op, "epsilon must be non-negative, got " + std::to_string(epsilon));
  const std::vector<int64_t> normalized(x.shape().begin() + static_cast<std::ptrdiff_t>(axis), x.shape().end());
  for (size_t i = 1; i < in.size(); ++i) {
    const char *role = i == 1 ? "gamma (scale)" : "beta (bias)";
    if (in[i].shape() != normalized)
      fail(op, std::string(role) + " must have the normalized shape " + shape_str(normalized) + " (x's axes from " +
                   std::to_string(axis) + "), got " + shape_str(in[i].shape()));
    if (in[i].dtype() != x.dtype())
      fail(op, std::string(role) + " has dtype " + ir::dtype_name(in[i].dtype()) + " but x is " +
                   ir::dtype_name(x.dtype()));
  }
  std::vector<int64_t> stat_shape = x.shape();
  int64_t count = 1;
  for (size_t d = axis; d < rank; ++d) {
    count *= stat_shape[d];
    stat_shape[d] = 1;
  }
  auto reduce_axes = [&] {
    std::vector<IterVar> r;
    for (size_t d = axis; d < rank; ++d) r.push_back(te::reduce_axis(x.shape()[d], "r" + std::to_string(d)));
    return r;
  };
  const Expr inv_count = ir::make_float(1.0 / static_cast<double>(count), x.dtype());
  std::vector<IterVar> r1 = reduce_axes();
  te::Tensor sum = te::compute(
      stat_shape, [&](const std::vector<Var> &v) { return te::sum(x(with_reduced(v, r1, axis)), r1); },
      "layer_norm_sum");
  // Two passes (mean first, then squared deviations) rather than E[x^2] - E[x]^2, which
  // cancels catastrophically when the mean is large relative to the spread.
  std::vector<IterVar> r2 = reduce_axes();
  te::Tensor var_sum = te::compute(
      stat_shape,
      [&](const std::vector<Var> &v) {
        Expr centered = x(with_reduced(v, r2, axis)) - sum(to_exprs(v)) * inv_count;
        return te::sum(centered * centered, r2);
      },
      "layer_norm_var_sum");
  const Expr eps = ir::make_float(epsilon, x.dtype());
  return te::compute(
      x.shape(),
      [&](const std::vector<Var> &v) {
        std::vector<Expr> s = stat_index(v, axis, rank);
        std::vector<Expr> param(v.begin() + static_cast<std::ptrdiff_t>(axis), v.end());
        Expr centered = x(to_exprs(v)) - sum(s) * inv_count;
        Expr scale = ir::make_call(Intrinsic::kRsqrt, {var_sum(s) * inv_count + eps});
        Expr y = centered * scale * gamma(param);
        return in.size() > 2 ? y + in[2](param) : y;
      },
      "layer_norm");
}

}  // namespace

std::vector<OpDef> normalization_ops() {
  std::vector<OpDef> ops;
  ops.push_back(OpDef{"softmax",
                      "exp(x - max) / sum(exp(x - max)) along one axis (ONNX Softmax, opset 13). Input: float x "
                      "of any rank. Attribute: axis (-1). Output has x's shape. Stages: softmax_max, "
                      "softmax_expsum (reductions with the axis kept at extent 1) and softmax_norm, which "
                      "recomputes the exponential instead of reading a stored one.",
                      1, 1, json{{"axis", -1}}, softmax});
  ops.push_back(OpDef{"layer_norm",
                      "Layer normalisation (ONNX LayerNormalization, stash_type=float). Inputs: float x, gamma "
                      "(scale), optional beta (bias), gamma and beta shaped like x's axes from `axis`. Attributes: "
                      "axis (-1), epsilon (1e-5). y = (x - mean) / sqrt(var + epsilon) * gamma + beta with mean "
                      "and (biased) variance over axes [axis, rank). Stages: layer_norm_sum, layer_norm_var_sum "
                      "(reductions, normalized axes kept at extent 1), layer_norm.",
                      2, 3, json{{"axis", -1}, {"epsilon", 1e-5}}, layer_norm});
  return ops;
}

}  // namespace kiln::ops::detail
