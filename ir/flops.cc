#include "ir/flops.h"

#include "ir/functor.h"

namespace kiln::ir {

static int64_t arithmetic_ops(const Expr &e) {
  int64_t n = 0;
  for_each_subexpr(e, [&](const Expr &x) {
    if (!is_float(x.dtype()) && x.kind() != ExprKind::kCall) return;
    switch (x.kind()) {
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul:
      case ExprKind::kDiv:
      case ExprKind::kMin:
      case ExprKind::kMax:
      case ExprKind::kCall:
        ++n;
        break;
      default:
        break;
    }
  });
  return n;
}

double estimate_flops(const te::ComputeDAG &dag) {
  double total = 0;
  for (const te::Tensor &t : dag.stages) {
    double points = 1;
    for (const IterVar &axis : t->axes) points *= static_cast<double>(axis.extent);
    int64_t ops = 0;
    if (const auto *red = t->body.as<ReduceNode>()) {
      for (const IterVar &axis : red->axes) points *= static_cast<double>(axis.extent);
      ops = arithmetic_ops(red->source) + 1;
    } else {
      ops = arithmetic_ops(t->body);
    }
    total += points * static_cast<double>(ops);
  }
  return total;
}

}  // namespace kiln::ir
