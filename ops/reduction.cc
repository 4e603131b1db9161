// Reductions over a set of axes (ONNX ReduceSum / ReduceMean / ReduceMax / ReduceMin,
// opset 18 semantics with the axes given as an attribute).
#include <string>

#include "ops/op_util.h"

namespace kiln::ops::detail {
namespace {

using ir::IterVar;

struct ReducedAxes {
  std::vector<bool> reduced;       // per input axis
  std::vector<int64_t> out_shape;  // with or without the kept extent-1 axes
  int64_t count = 1;               // elements folded into each output
};

ReducedAxes parse_axes(std::string_view op, const te::Tensor &x, const json &attrs) {
  const int64_t rank = static_cast<int64_t>(x.ndim());
  std::vector<int64_t> axes = attr_ints(attrs, "axes");
  ReducedAxes r;
  r.reduced.assign(rank, axes.empty());  // no axes: reduce everything (ONNX default)
  for (int64_t a : axes) {
    int64_t axis = normalize_axis(op, a, rank, "reduction axis");
    if (r.reduced[axis]) fail(op, "axis " + std::to_string(a) + " appears more than once in axes " + shape_str(axes));
    r.reduced[axis] = true;
  }
  const bool keepdims = attr_bool(attrs, "keepdims");
  for (int64_t d = 0; d < rank; ++d) {
    if (r.reduced[d]) {
      r.count *= x.shape()[d];
      if (keepdims) r.out_shape.push_back(1);
    } else {
      r.out_shape.push_back(x.shape()[d]);
    }
  }
  // A full reduction without keepdims is a scalar in ONNX; Kiln's loop programs have at
  // least one axis, so it is represented as shape [1].
  if (r.out_shape.empty()) r.out_shape.push_back(1);
  return r;
}

te::Tensor reduce(std::string_view op, const te::Tensor &x, const json &attrs, ir::Combiner combiner,
                  const std::string &name) {
  if (x.dtype() == DType::kBool) fail(op, "boolean inputs are not supported");
  ReducedAxes r = parse_axes(op, x, attrs);
  const bool keepdims = attr_bool(attrs, "keepdims");
  std::vector<IterVar> axes;
  for (size_t d = 0; d < x.ndim(); ++d) {
    if (r.reduced[d]) axes.push_back(te::reduce_axis(x.shape()[d], "r" + std::to_string(d)));
  }
  return te::compute(
      r.out_shape,
      [&](const std::vector<Var> &v) {
        std::vector<Expr> idx;
        size_t next_out = 0, next_reduce = 0;
        for (size_t d = 0; d < x.ndim(); ++d) {
          if (r.reduced[d]) {
            idx.push_back(axes[next_reduce++].var);
            if (keepdims) ++next_out;
          } else {
            idx.push_back(v[next_out++]);
          }
        }
        return ir::make_reduce(combiner, x(idx), axes);
      },
      name);
}

te::Tensor reduce_mean(const std::vector<te::Tensor> &in, const json &attrs) {
  const char *op = "reduce_mean";
  require_float(op, in[0], "input");
  te::Tensor sum = reduce(op, in[0], attrs, ir::Combiner::kSum, "reduce_mean_sum");
  const int64_t count = parse_axes(op, in[0], attrs).count;
  Expr divisor = ir::make_float(static_cast<double>(count), in[0].dtype());
  return te::compute(
      sum.shape(), [&](const std::vector<Var> &v) { return sum(to_exprs(v)) / divisor; }, "reduce_mean");
}

OpDef reduction(const std::string &name, const std::string &doc,
                std::function<te::Tensor(const std::vector<te::Tensor> &, const json &)> build) {
  return OpDef{name,
               doc +
                   " Input: x of any rank. Attributes: axes (list, negatives count from the end; empty = all "
                   "axes), keepdims (true: reduced axes stay with extent 1). A full reduction without keepdims "
                   "gives shape [1] rather than a scalar.",
               1,
               1,
               json{{"axes", json::array()}, {"keepdims", true}},
               std::move(build)};
}

}  // namespace

std::vector<OpDef> reduction_ops() {
  std::vector<OpDef> ops;
  ops.push_back(reduction("reduce_sum", "Sum over axes (ONNX ReduceSum). Stage: reduce_sum. Any numeric dtype.",
                          [](const std::vector<te::Tensor> &in, const json &attrs) {
                            return reduce("reduce_sum", in[0], attrs, ir::Combiner::kSum, "reduce_sum");
                          }));
  ops.push_back(reduction("reduce_mean",
                          "Mean over axes (ONNX ReduceMean). Stages: reduce_mean_sum, reduce_mean. Float only.",
                          reduce_mean));
  ops.push_back(reduction("reduce_max", "Maximum over axes (ONNX ReduceMax). Stage: reduce_max. Any numeric dtype.",
                          [](const std::vector<te::Tensor> &in, const json &attrs) {
                            return reduce("reduce_max", in[0], attrs, ir::Combiner::kMax, "reduce_max");
                          }));
  ops.push_back(reduction("reduce_min", "Minimum over axes (ONNX ReduceMin). Stage: reduce_min. Any numeric dtype.",
                          [](const std::vector<te::Tensor> &in, const json &attrs) {
                            return reduce("reduce_min", in[0], attrs, ir::Combiner::kMin, "reduce_min");
                          }));
  return ops;
}

}  // namespace kiln::ops::detail
