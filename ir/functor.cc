#include "ir/functor.h"

namespace kiln::ir {

// ---- IRVisitor --------------------------------------------------------------------------
void IRVisitor::visit(const IntImmNode *, const Expr &) {}
void IRVisitor::visit(const FloatImmNode *, const Expr &) {}
void IRVisitor::visit(const VarNode *, const Expr &) {}
#define KILN_VISIT_BINARY(N)                               \
  void IRVisitor::visit(const N##Node *op, const Expr &) { \
    visit_expr(op->a);                                     \
    visit_expr(op->b);                                     \
  }
KILN_VISIT_BINARY(Add)
KILN_VISIT_BINARY(Sub)
KILN_VISIT_BINARY(Mul)
KILN_VISIT_BINARY(Div)
KILN_VISIT_BINARY(FloorDiv)
KILN_VISIT_BINARY(FloorMod)
KILN_VISIT_BINARY(Min)
KILN_VISIT_BINARY(Max)
KILN_VISIT_BINARY(EQ)
KILN_VISIT_BINARY(NE)
KILN_VISIT_BINARY(LT)
KILN_VISIT_BINARY(LE)
KILN_VISIT_BINARY(GT)
KILN_VISIT_BINARY(GE)
KILN_VISIT_BINARY(And)
KILN_VISIT_BINARY(Or)
#undef KILN_VISIT_BINARY
void IRVisitor::visit(const NotNode *op, const Expr &) { visit_expr(op->a); }
void IRVisitor::visit(const SelectNode *op, const Expr &) {
  visit_expr(op->cond);
  visit_expr(op->true_value);
  visit_expr(op->false_value);
}
void IRVisitor::visit(const CastNode *op, const Expr &) { visit_expr(op->value); }
void IRVisitor::visit(const CallNode *op, const Expr &) {
  for (const Expr &a : op->args) visit_expr(a);
}
void IRVisitor::visit(const LoadNode *op, const Expr &) {
  for (const Expr &i : op->indices) visit_expr(i);
}
void IRVisitor::visit(const ReduceNode *op, const Expr &) { visit_expr(op->source); }

void IRVisitor::visit(const ForNode *op, const Stmt &) { visit_stmt(op->body); }
void IRVisitor::visit(const SeqNode *op, const Stmt &) {
  for (const Stmt &s : op->stmts) visit_stmt(s);
}
void IRVisitor::visit(const BlockNode *op, const Stmt &) {
  for (const Expr &v : op->iter_values) visit_expr(v);
  visit_expr(op->predicate);
  if (op->init.defined()) visit_stmt(op->init);
  visit_stmt(op->body);
}
void IRVisitor::visit(const StoreNode *op, const Stmt &) {
  for (const Expr &i : op->indices) visit_expr(i);
  visit_expr(op->value);
}
void IRVisitor::visit(const IfThenElseNode *op, const Stmt &) {
  visit_expr(op->cond);
  visit_stmt(op->then_case);
  if (op->else_case.defined()) visit_stmt(op->else_case);
}

void IRVisitor::visit(const BarrierNode *, const Stmt &) {}
void IRVisitor::visit(const ThreadAllReduceNode *, const Stmt &) {}

// ---- IRMutator --------------------------------------------------------------------------
template <typename T>
static bool mutate_all(const std::vector<T> &in, std::vector<T> *out, const std::function<T(const T &)> &fn) {
  bool changed = false;
  out->reserve(in.size());
  for (const T &x : in) {
    out->push_back(fn(x));
    if (!out->back().same_as(x)) changed = true;
  }
  return changed;
}

Expr IRMutator::visit(const IntImmNode *, const Expr &self) { return self; }
Expr IRMutator::visit(const FloatImmNode *, const Expr &self) { return self; }
Expr IRMutator::visit(const VarNode *, const Expr &self) { return self; }
#define KILN_MUTATE_BINARY(N)                                       \
  Expr IRMutator::visit(const N##Node *op, const Expr &self) {      \
    Expr a = mutate(op->a), b = mutate(op->b);                      \
    if (a.same_as(op->a) && b.same_as(op->b)) return self;          \
    return make_binary(ExprKind::k##N, std::move(a), std::move(b)); \
  }
KILN_MUTATE_BINARY(Add)
KILN_MUTATE_BINARY(Sub)
KILN_MUTATE_BINARY(Mul)
KILN_MUTATE_BINARY(Div)
KILN_MUTATE_BINARY(FloorDiv)
KILN_MUTATE_BINARY(FloorMod)
KILN_MUTATE_BINARY(Min)
KILN_MUTATE_BINARY(Max)
KILN_MUTATE_BINARY(EQ)
KILN_MUTATE_BINARY(NE)
KILN_MUTATE_BINARY(LT)
KILN_MUTATE_BINARY(LE)
KILN_MUTATE_BINARY(GT)
KILN_MUTATE_BINARY(GE)
KILN_MUTATE_BINARY(And)
KILN_MUTATE_BINARY(Or)
#undef KILN_MUTATE_BINARY
Expr IRMutator::visit(const NotNode *op, const Expr &self) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? self : make_not(a);
}
Expr IRMutator::visit(const SelectNode *op, const Expr &self) {
  Expr c = mutate(op->cond), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
  return make_select(c, t, f);
}
Expr IRMutator::visit(const CastNode *op, const Expr &self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : make_cast(op->dtype, v);
}
Expr IRMutator::visit(const CallNode *op, const Expr &self) {
  std::vector<Expr> args;
  bool changed = mutate_all<Expr>(op->args, &args, [this](const Expr &e) { return mutate(e); });
  return changed ? make_call(op->op, std::move(args)) : self;
}
Expr IRMutator::visit(const LoadNode *op, const Expr &self) {
  std::vector<Expr> idx;
  bool changed = mutate_all<Expr>(op->indices, &idx, [this](const Expr &e) { return mutate(e); });
  Buffer b = mutate_buffer(op->buffer);
  if (!changed && b == op->buffer) return self;
  return make_load(std::move(b), std::move(idx));
}
Expr IRMutator::visit(const ReduceNode *op, const Expr &self) {
  Expr s = mutate(op->source);
  return s.same_as(op->source) ? self : make_reduce(op->combiner, s, op->axes);
}

Stmt IRMutator::visit(const ForNode *op, const Stmt &self) {
  Stmt body = mutate(op->body);
  return body.same_as(op->body) ? self : with_body(op, std::move(body));
}
Stmt IRMutator::visit(const SeqNode *op, const Stmt &self) {
  std::vector<Stmt> stmts;
  bool changed = mutate_all<Stmt>(op->stmts, &stmts, [this](const Stmt &s) { return mutate(s); });
  return changed ? make_seq(std::move(stmts)) : self;
}
Stmt IRMutator::visit(const BlockNode *op, const Stmt &self) {
  std::vector<Expr> values;
  bool changed = mutate_all<Expr>(op->iter_values, &values, [this](const Expr &e) { return mutate(e); });
  Expr pred = mutate(op->predicate);
  Stmt init = mutate(op->init);
  Stmt body = mutate(op->body);
  std::vector<Buffer> allocs;
  for (const Buffer &b : op->alloc_buffers) {
    allocs.push_back(mutate_buffer(b));
    if (allocs.back() != b) changed = true;
  }
  if (!changed && pred.same_as(op->predicate) && init.same_as(op->init) && body.same_as(op->body)) return self;
  return make_block(op->name, op->iter_vars, std::move(values), std::move(pred), std::move(init), std::move(body),
                    std::move(allocs), op->annotations);
}
Stmt IRMutator::visit(const StoreNode *op, const Stmt &self) {
  std::vector<Expr> idx;
  bool changed = mutate_all<Expr>(op->indices, &idx, [this](const Expr &e) { return mutate(e); });
  Expr v = mutate(op->value);
  Buffer b = mutate_buffer(op->buffer);
  if (!changed && v.same_as(op->value) && b == op->buffer) return self;
  return make_store(std::move(b), std::move(idx), std::move(v));
}
Stmt IRMutator::visit(const IfThenElseNode *op, const Stmt &self) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return make_if(c, t, e);
}

Stmt IRMutator::visit(const BarrierNode *, const Stmt &self) { return self; }
Stmt IRMutator::visit(const ThreadAllReduceNode *op, const Stmt &self) {
  Buffer value = mutate_buffer(op->value);
  Buffer scratch = op->scratch ? mutate_buffer(op->scratch) : op->scratch;
  if (value == op->value && scratch == op->scratch) return self;
  return make_thread_allreduce(op->combiner, value, scratch, op->axis, op->extent);
}

// ---- helpers ----------------------------------------------------------------------------
namespace {
class ExprCallback : public IRVisitor {
 public:
  explicit ExprCallback(const std::function<void(const Expr &)> &fn) : fn_(fn) {}
  using IRVisitor::visit_expr;

 protected:
#define KILN_HOOK(N)                                         \
  void visit(const N##Node *op, const Expr &self) override { \
    fn_(self);                                               \
    IRVisitor::visit(op, self);                              \
  }
  KILN_EXPR_NODES(KILN_HOOK)
#undef KILN_HOOK

 private:
  const std::function<void(const Expr &)> &fn_;
};

// Statements only: no statement sits inside an expression, so expressions are not
// walked (an element-wise chain inlined into one block is one deep expression, and the
// queries built on this run once per schedule primitive).
class StmtCallback : public IRVisitor {
 public:
  explicit StmtCallback(const std::function<void(const Stmt &)> &fn) : fn_(fn) {}

 protected:
#define KILN_HOOK(N)                                         \
  void visit(const N##Node *op, const Stmt &self) override { \
    fn_(self);                                               \
    IRVisitor::visit(op, self);                              \
  }
  KILN_STMT_NODES(KILN_HOOK)
#undef KILN_HOOK
#define KILN_SKIP(N) \
  void visit(const N##Node *, const Expr &) override {}
  KILN_EXPR_NODES(KILN_SKIP)
#undef KILN_SKIP

 private:
  const std::function<void(const Stmt &)> &fn_;
};

class Substituter : public IRMutator {
 public:
  explicit Substituter(const VarMap &map) : map_(map) {}

 protected:
  Expr visit(const VarNode *op, const Expr &self) override {
    auto it = map_.find(op);
    return it == map_.end() ? self : it->second;
  }

 private:
  const VarMap &map_;
};
}  // namespace

void for_each_subexpr(const Expr &e, const std::function<void(const Expr &)> &fn) {
  if (!e.defined()) return;
  ExprCallback cb(fn);
  cb.visit_expr(e);
}

std::vector<Expr> RemapBuffer::remap(const std::vector<Expr> &indices) {
  std::vector<Expr> mutated;
  for (const Expr &e : indices) mutated.push_back(mutate(e));
  return map_(std::move(mutated));
}

Expr RemapBuffer::visit(const LoadNode *op, const Expr &self) {
  if (op->buffer != from_) return IRMutator::visit(op, self);
  return make_load(to_, remap(op->indices));
}

Stmt RemapBuffer::visit(const StoreNode *op, const Stmt &self) {
  if (op->buffer != from_) return IRMutator::visit(op, self);
  return make_store(to_, remap(op->indices), mutate(op->value));
}

void for_each_expr(const Stmt &s, const std::function<void(const Expr &)> &fn) {
  if (!s.defined()) return;
  ExprCallback cb(fn);
  cb.visit_stmt(s);
}

void for_each_stmt(const Stmt &s, const std::function<void(const Stmt &)> &fn) {
  if (!s.defined()) return;
  StmtCallback cb(fn);
  cb.visit_stmt(s);
}

Expr substitute(const Expr &e, const VarMap &map) {
  if (map.empty()) return e;
  Substituter sub(map);
  return sub.mutate(e);
}

Stmt substitute(const Stmt &s, const VarMap &map) {
  if (map.empty()) return s;
  Substituter sub(map);
  return sub.mutate(s);
}

void conjuncts(const Expr &e, std::vector<Expr> *out) {
  if (const auto *a = e.as<AndNode>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else if (!is_const_int(e, 1)) {
    out->push_back(e);
  }
}

bool uses_var(const Expr &e, const VarNode *v) {
  bool found = false;
  for_each_subexpr(e, [&](const Expr &x) {
    if (x.get() == v) found = true;
  });
  return found;
}

}  // namespace kiln::ir
