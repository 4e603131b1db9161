#include "te/flops.h"

#include <algorithm>

#include "ir/functor.h"

namespace kiln::te {

// The counter walks loop-program expressions of the IR.
using namespace kiln::ir;

namespace {

bool counts_as_operation(const Expr &x) {
  if (!is_float(x.dtype()) && x.kind() != ExprKind::kCall) return false;
  switch (x.kind()) {
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kMin:
    case ExprKind::kMax:
    case ExprKind::kCall:
      return true;
    default:
      return false;
  }
}

// Floating-point operations of one evaluation. A select evaluates one of its sides, so
// it counts the costlier one: a table written as a chain of selects (Winograd's
// transforms) costs one row, not all of them.
int64_t arithmetic_ops(const Expr &e);

class OperationCounter : public IRVisitor {
 public:
  int64_t count = 0;
  using IRVisitor::visit_expr;

 protected:
#define KILN_COUNT(N)                                        \
  void visit(const N##Node *op, const Expr &self) override { \
    if (count_select(self)) return;                          \
    if (counts_as_operation(self)) ++count;                  \
    IRVisitor::visit(op, self);                              \
  }
  KILN_EXPR_NODES(KILN_COUNT)
#undef KILN_COUNT

 private:
  bool count_select(const Expr &self) {
    const auto *select = self.as<SelectNode>();
    if (!select) return false;
    count += arithmetic_ops(select->cond) +
             std::max(arithmetic_ops(select->true_value), arithmetic_ops(select->false_value));
    return true;
  }
};

int64_t arithmetic_ops(const Expr &e) {
  OperationCounter counter;
  counter.visit_expr(e);
  return counter.count;
}

}  // namespace

double estimate_flops(const ComputeDAG &dag) {
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

}  // namespace kiln::te
