// Linear forms of index expressions (see linear_form.h).

#include "costmodel/linear_form.h"

#include <algorithm>

#include "ir/functor.h"

namespace kiln::costmodel {

double LinearForm::coefficient(const ir::VarNode *v) const {
  for (const auto &[var, c] : terms) {
    if (var == v) return c;
  }
  return 0;
}

static void add_scaled(LinearForm *to, const LinearForm &from, double scale) {
  to->constant += from.constant * scale;
  to->exact = to->exact && from.exact;
  for (const auto &[var, c] : from.terms) {
    auto it = std::find_if(to->terms.begin(), to->terms.end(), [v = var](const auto &t) { return t.first == v; });
    if (it == to->terms.end()) {
      to->terms.emplace_back(var, c * scale);
    } else {
      it->second += c * scale;
    }
  }
  std::erase_if(to->terms, [](const auto &t) { return t.second == 0; });
}

/// Every variable with coefficient 1: the fallback for non-affine expressions.
static LinearForm opaque(const ir::Expr &e) {
  LinearForm f;
  f.exact = false;
  ir::for_each_subexpr(e, [&](const ir::Expr &x) {
    const auto *v = x.as<ir::VarNode>();
    if (v == nullptr) return;
    if (std::none_of(f.terms.begin(), f.terms.end(), [&](const auto &t) { return t.first == v; })) {
      f.terms.emplace_back(v, 1.0);
    }
  });
  return f;
}

namespace {

class LinearFormBuilder : public ir::ExprFunctor<LinearForm> {
 protected:
  LinearForm visit(const ir::IntImmNode *op, const ir::Expr &) override {
    LinearForm f;
    f.constant = static_cast<double>(op->value);
    return f;
  }
  LinearForm visit(const ir::VarNode *op, const ir::Expr &) override {
    LinearForm f;
    f.terms.emplace_back(op, 1.0);
    return f;
  }
  LinearForm visit(const ir::AddNode *op, const ir::Expr &) override {
    LinearForm f = visit_expr(op->a);
    add_scaled(&f, visit_expr(op->b), 1);
    return f;
  }
  LinearForm visit(const ir::SubNode *op, const ir::Expr &) override {
    LinearForm f = visit_expr(op->a);
    add_scaled(&f, visit_expr(op->b), -1);
    return f;
  }
  LinearForm visit(const ir::MulNode *op, const ir::Expr &self) override {
    int64_t c = 0;
    LinearForm f;
    if (ir::as_const_int(op->b, &c)) {
      add_scaled(&f, visit_expr(op->a), static_cast<double>(c));
      return f;
    }
    if (ir::as_const_int(op->a, &c)) {
      add_scaled(&f, visit_expr(op->b), static_cast<double>(c));
      return f;
    }
    return opaque(self);
  }
  LinearForm visit(const ir::FloorDivNode *op, const ir::Expr &self) override {
    int64_t c = 0;
    if (!ir::as_const_int(op->b, &c) || c <= 0) return opaque(self);
    LinearForm f;
    add_scaled(&f, visit_expr(op->a), 1.0 / static_cast<double>(c));
    f.exact = false;
    return f;
  }
  LinearForm visit(const ir::FloorModNode *op, const ir::Expr &self) override {
    int64_t c = 0;
    if (!ir::as_const_int(op->b, &c) || c <= 0) return opaque(self);
    LinearForm f = visit_expr(op->a);
    f.constant = 0;
    f.exact = false;
    return f;
  }
  LinearForm visit(const ir::CastNode *op, const ir::Expr &) override { return visit_expr(op->value); }

#define KILN_OPAQUE(N) \
  LinearForm visit(const ir::N##Node *, const ir::Expr &self) override { return opaque(self); }
  KILN_OPAQUE(FloatImm)
  KILN_OPAQUE(Div)
  KILN_OPAQUE(Min)
  KILN_OPAQUE(Max)
  KILN_OPAQUE(EQ)
  KILN_OPAQUE(NE)
  KILN_OPAQUE(LT)
  KILN_OPAQUE(LE)
  KILN_OPAQUE(GT)
  KILN_OPAQUE(GE)
  KILN_OPAQUE(And)
  KILN_OPAQUE(Or)
  KILN_OPAQUE(Not)
  KILN_OPAQUE(Select)
  KILN_OPAQUE(Call)
  KILN_OPAQUE(Load)
  KILN_OPAQUE(Reduce)
#undef KILN_OPAQUE
};

}  // namespace

LinearForm linear_form(const ir::Expr &e) {
  LinearFormBuilder builder;
  return builder.visit_expr(e);
}

}  // namespace kiln::costmodel
