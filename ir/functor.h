// The traversal bases: one functor (dispatch on node kind) per IR family, and the
// default recursive visitor and copy-on-write mutator built on them. They are the one
// place that dispatches on every node kind, generated from the node lists of expr.h and
// stmt.h: a kind added there must be handled by every class deriving from a functor
// directly, or it does not compile. Passes, printers, the interpreter and code
// generation derive from these. Other code switches on a kind only over a few kinds
// that share one piece of work, with a default for the rest: the factories that rebuild
// a node of a given kind (make_cmp, make_binary in expr.cc), interval bounds and the
// folding of comparisons (simplify.cc), operation counts (flops.cc), and the LLVM
// instruction chosen per arithmetic or comparison kind once the functor has dispatched
// (codegen/lower_llvm.cc).
#pragma once

#include <functional>
#include <unordered_map>

#include "ir/stmt.h"

namespace kiln::ir {

template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;
  R visit_expr(const Expr &e) {
    switch (e.kind()) {
#define KILN_DISPATCH(N) \
  case ExprKind::k##N:   \
    return visit(static_cast<const N##Node *>(e.get()), e);
      KILN_EXPR_NODES(KILN_DISPATCH)
#undef KILN_DISPATCH
    }
    throw IRError("unknown expression kind");
  }

 protected:
#define KILN_DECLARE(N) virtual R visit(const N##Node *op, const Expr &self) = 0;
  KILN_EXPR_NODES(KILN_DECLARE)
#undef KILN_DECLARE
};

template <typename R>
class StmtFunctor {
 public:
  virtual ~StmtFunctor() = default;
  R visit_stmt(const Stmt &s) {
    switch (s.kind()) {
#define KILN_DISPATCH(N) \
  case StmtKind::k##N:   \
    return visit(static_cast<const N##Node *>(s.get()), s);
      KILN_STMT_NODES(KILN_DISPATCH)
#undef KILN_DISPATCH
    }
    throw IRError("unknown statement kind");
  }

 protected:
#define KILN_DECLARE(N) virtual R visit(const N##Node *op, const Stmt &self) = 0;
  KILN_STMT_NODES(KILN_DECLARE)
#undef KILN_DECLARE
};

/// Visits every node; overrides call the base to keep recursing.
class IRVisitor : public ExprFunctor<void>, public StmtFunctor<void> {
 public:
  using ExprFunctor<void>::visit_expr;
  using StmtFunctor<void>::visit_stmt;

 protected:
#define KILN_DECLARE(N) void visit(const N##Node *op, const Expr &self) override;
  KILN_EXPR_NODES(KILN_DECLARE)
#undef KILN_DECLARE
#define KILN_DECLARE(N) void visit(const N##Node *op, const Stmt &self) override;
  KILN_STMT_NODES(KILN_DECLARE)
#undef KILN_DECLARE
};

/// Rebuilds a node only when a child changed, so untouched subtrees stay shared.
class IRMutator : public ExprFunctor<Expr>, public StmtFunctor<Stmt> {
 public:
  Expr mutate(const Expr &e) { return e.defined() ? visit_expr(e) : e; }
  Stmt mutate(const Stmt &s) { return s.defined() ? visit_stmt(s) : s; }

 protected:
  /// Hook for passes that replace buffers (cache_read/cache_write); applied to loads,
  /// stores and block allocations.
  virtual Buffer mutate_buffer(const Buffer &b) { return b; }

#define KILN_DECLARE(N) Expr visit(const N##Node *op, const Expr &self) override;
  KILN_EXPR_NODES(KILN_DECLARE)
#undef KILN_DECLARE
#define KILN_DECLARE(N) Stmt visit(const N##Node *op, const Stmt &self) override;
  KILN_STMT_NODES(KILN_DECLARE)
#undef KILN_DECLARE
};

/// Replaces every access of buffer `from` (loads, stores, allocations) by one of `to`,
/// indexed by `map` applied to the access's indices (already mutated): compaction's
/// rebasing, a layout's permutation, a packed buffer's leading panel indices.
class RemapBuffer : public IRMutator {
 public:
  using IndexMap = std::function<std::vector<Expr>(std::vector<Expr>)>;
  RemapBuffer(Buffer from, Buffer to, IndexMap map)
      : from_(std::move(from)), to_(std::move(to)), map_(std::move(map)) {}

 protected:
  Buffer mutate_buffer(const Buffer &b) override { return b == from_ ? to_ : b; }
  Expr visit(const LoadNode *op, const Expr &self) override;
  Stmt visit(const StoreNode *op, const Stmt &self) override;

 private:
  std::vector<Expr> remap(const std::vector<Expr> &indices);
  Buffer from_, to_;
  IndexMap map_;
};

/// Calls `fn` on every expression node (pre-order); for_each_expr also looks inside statements.
void for_each_subexpr(const Expr &e, const std::function<void(const Expr &)> &fn);
void for_each_expr(const Stmt &s, const std::function<void(const Expr &)> &fn);
/// Calls `fn` on every statement node (pre-order).
void for_each_stmt(const Stmt &s, const std::function<void(const Stmt &)> &fn);

/// Replaces variables by expressions.
using VarMap = std::unordered_map<const VarNode *, Expr>;
Expr substitute(const Expr &e, const VarMap &map);
Stmt substitute(const Stmt &s, const VarMap &map);
bool uses_var(const Expr &e, const VarNode *v);
/// Appends the terms of a conjunction (a && b && ...) to `out`, leaving out constant
/// true terms.
void conjuncts(const Expr &e, std::vector<Expr> *out);

}  // namespace kiln::ir
