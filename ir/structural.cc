#include "ir/structural.h"

#include <unordered_map>

#include "ir/functor.h"

namespace kiln::ir {
namespace {

// Pairs definitions (loop vars, iterators, buffers) as they are met; uses must then
// refer to paired definitions. Free variables and buffers compare by name and type.
class EqualityChecker : public ExprFunctor<bool>, public StmtFunctor<bool> {
 public:
  explicit EqualityChecker(bool by_identity = false) : by_identity_(by_identity) {}

  bool equal(const Expr &a, const Expr &b) {
    if (a.same_as(b)) return true;
    if (!a.defined() || !b.defined()) return false;
    if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
    Expr saved = other_expr_;
    other_expr_ = b;
    bool r = visit_expr(a);
    other_expr_ = saved;
    return r;
  }
  bool equal(const Stmt &a, const Stmt &b) {
    if (!a.defined() || !b.defined()) return a.defined() == b.defined();
    if (a.kind() != b.kind()) return false;
    Stmt saved = other_stmt_;
    other_stmt_ = b;
    bool r = visit_stmt(a);
    other_stmt_ = saved;
    return r;
  }
  bool define_var(const Var &a, const Var &b) {
    if (a.dtype() != b.dtype()) return false;
    vars_[a.get()] = b.get();
    return true;
  }
  bool define_buffer(const Buffer &a, const Buffer &b) {
    if (!same_buffer_type(a, b)) return false;
    buffers_[a.get()] = b.get();
    return true;
  }
  bool equal_buffer(const Buffer &a, const Buffer &b) {
    auto it = buffers_.find(a.get());
    if (it != buffers_.end()) return it->second == b.get();
    return a == b || (!by_identity_ && a->name == b->name && same_buffer_type(a, b));
  }

 private:
  static bool same_buffer_type(const Buffer &a, const Buffer &b) {
    return a->dtype == b->dtype && a->shape == b->shape && a->scope == b->scope;
  }
  template <typename T>
  const T *other() const {
    return static_cast<const T *>(other_expr_.get());
  }
  template <typename T>
  const T *other_stmt() const {
    return static_cast<const T *>(other_stmt_.get());
  }
  bool equal_all(const std::vector<Expr> &a, const std::vector<Expr> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!equal(a[i], b[i])) return false;
    return true;
  }

  bool visit(const IntImmNode *op, const Expr &) override { return op->value == other<IntImmNode>()->value; }
  bool visit(const FloatImmNode *op, const Expr &) override {
    double x = op->value, y = other<FloatImmNode>()->value;
    return x == y || (x != x && y != y);
  }
  bool visit(const VarNode *op, const Expr &) override {
    const VarNode *o = other<VarNode>();
    auto it = vars_.find(op);
    if (it != vars_.end()) return it->second == o;
    return by_identity_ ? op == o : op->name == o->name;
  }
#define KILN_EQ_BINARY(N)                                \
  bool visit(const N##Node *op, const Expr &) override { \
    const N##Node *o = other<N##Node>();                 \
    return equal(op->a, o->a) && equal(op->b, o->b);     \
  }
  KILN_EQ_BINARY(Add)
  KILN_EQ_BINARY(Sub)
  KILN_EQ_BINARY(Mul)
  KILN_EQ_BINARY(Div)
  KILN_EQ_BINARY(FloorDiv)
  KILN_EQ_BINARY(FloorMod)
  KILN_EQ_BINARY(Min)
  KILN_EQ_BINARY(Max)
  KILN_EQ_BINARY(EQ)
  KILN_EQ_BINARY(NE)
  KILN_EQ_BINARY(LT)
  KILN_EQ_BINARY(LE)
  KILN_EQ_BINARY(GT)
  KILN_EQ_BINARY(GE)
  KILN_EQ_BINARY(And)
  KILN_EQ_BINARY(Or)
#undef KILN_EQ_BINARY
  bool visit(const NotNode *op, const Expr &) override { return equal(op->a, other<NotNode>()->a); }
  bool visit(const SelectNode *op, const Expr &) override {
    const SelectNode *o = other<SelectNode>();
    return equal(op->cond, o->cond) && equal(op->true_value, o->true_value) && equal(op->false_value, o->false_value);
  }
  bool visit(const CastNode *op, const Expr &) override { return equal(op->value, other<CastNode>()->value); }
  bool visit(const CallNode *op, const Expr &) override {
    const CallNode *o = other<CallNode>();
    return op->op == o->op && equal_all(op->args, o->args);
  }
  bool visit(const LoadNode *op, const Expr &) override {
    const LoadNode *o = other<LoadNode>();
    return equal_buffer(op->buffer, o->buffer) && equal_all(op->indices, o->indices);
  }
  bool visit(const ReduceNode *op, const Expr &) override {
    const ReduceNode *o = other<ReduceNode>();
    if (op->combiner != o->combiner || op->axes.size() != o->axes.size()) return false;
    for (size_t i = 0; i < op->axes.size(); ++i) {
      if (op->axes[i].extent != o->axes[i].extent || !define_var(op->axes[i].var, o->axes[i].var)) return false;
    }
    return equal(op->source, o->source);
  }

  bool visit(const ForNode *op, const Stmt &) override {
    const ForNode *o = other_stmt<ForNode>();
    if (op->extent != o->extent || op->for_kind != o->for_kind || op->thread_tag != o->thread_tag ||
        op->annotations != o->annotations)
      return false;
    return define_var(op->loop_var, o->loop_var) && equal(op->body, o->body);
  }
  bool visit(const SeqNode *op, const Stmt &) override {
    const SeqNode *o = other_stmt<SeqNode>();
    if (op->stmts.size() != o->stmts.size()) return false;
    for (size_t i = 0; i < op->stmts.size(); ++i)
      if (!equal(op->stmts[i], o->stmts[i])) return false;
    return true;
  }
  bool visit(const BlockNode *op, const Stmt &) override {
    const BlockNode *o = other_stmt<BlockNode>();
    if (op->name != o->name || op->iter_vars.size() != o->iter_vars.size() ||
        op->alloc_buffers.size() != o->alloc_buffers.size() || op->annotations != o->annotations)
      return false;
    if (!equal_all(op->iter_values, o->iter_values)) return false;
    for (size_t i = 0; i < op->iter_vars.size(); ++i) {
      const IterVar &a = op->iter_vars[i], &b = o->iter_vars[i];
      if (a.extent != b.extent || a.kind != b.kind || !define_var(a.var, b.var)) return false;
    }
    for (size_t i = 0; i < op->alloc_buffers.size(); ++i)
      if (!define_buffer(op->alloc_buffers[i], o->alloc_buffers[i])) return false;
    return equal(op->predicate, o->predicate) && equal(op->init, o->init) && equal(op->body, o->body);
  }
  bool visit(const StoreNode *op, const Stmt &) override {
    const StoreNode *o = other_stmt<StoreNode>();
    return equal_buffer(op->buffer, o->buffer) && equal_all(op->indices, o->indices) && equal(op->value, o->value);
  }
  bool visit(const IfThenElseNode *op, const Stmt &) override {
    const IfThenElseNode *o = other_stmt<IfThenElseNode>();
    return equal(op->cond, o->cond) && equal(op->then_case, o->then_case) && equal(op->else_case, o->else_case);
  }
  bool visit(const BarrierNode *, const Stmt &) override { return true; }
  bool visit(const ThreadAllReduceNode *op, const Stmt &) override {
    const ThreadAllReduceNode *o = other_stmt<ThreadAllReduceNode>();
    return op->combiner == o->combiner && op->axis == o->axis && op->extent == o->extent &&
           equal_buffer(op->value, o->value) && (op->scratch == nullptr) == (o->scratch == nullptr) &&
           (!op->scratch || equal_buffer(op->scratch, o->scratch));
  }

  bool by_identity_;
  Expr other_expr_;
  Stmt other_stmt_;
  std::unordered_map<const VarNode *, const VarNode *> vars_;
  std::unordered_map<const BufferNode *, const BufferNode *> buffers_;
};

// Hashes shape, not identity: defined variables and buffers hash by definition order.
class Hasher : public IRVisitor {
 public:
  uint64_t h = 0x9e3779b97f4a7c15ull;

  void mix(uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  void mix(const std::string &s) { mix(std::hash<std::string>()(s)); }
  void define(const Var &v) { vars_[v.get()] = next_id_++; }
  void define(const Buffer &b) {
    buffers_[b.get()] = next_id_++;
    mix_buffer_type(b);
  }
  void mix_buffer_type(const Buffer &b) {
    mix(static_cast<uint64_t>(b->dtype));
    mix(static_cast<uint64_t>(b->scope));
    for (int64_t d : b->shape) mix(static_cast<uint64_t>(d));
  }
  void mix_buffer(const Buffer &b) {
    auto it = buffers_.find(b.get());
    if (it != buffers_.end()) {
      mix(it->second);
    } else {
      mix(b->name);
      mix_buffer_type(b);
    }
  }
  void expr(const Expr &e) {
    if (!e.defined()) {
      mix(0xdeadull);
      return;
    }
    mix(static_cast<uint64_t>(e.kind()) * 131 + static_cast<uint64_t>(e.dtype()));
    visit_expr(e);
  }
  void stmt(const Stmt &s) {
    if (!s.defined()) {
      mix(0xbeefull);
      return;
    }
    mix(1000 + static_cast<uint64_t>(s.kind()));
    visit_stmt(s);
  }

 protected:
  void visit(const IntImmNode *op, const Expr &) override { mix(static_cast<uint64_t>(op->value)); }
  void visit(const FloatImmNode *op, const Expr &) override { mix(std::hash<double>()(op->value)); }
  void visit(const VarNode *op, const Expr &) override {
    auto it = vars_.find(op);
    if (it != vars_.end()) {
      mix(it->second);
    } else {
      mix(op->name);
    }
  }
  void visit(const CallNode *op, const Expr &) override {
    mix(static_cast<uint64_t>(op->op));
    for (const Expr &a : op->args) expr(a);
  }
  void visit(const LoadNode *op, const Expr &) override {
    mix_buffer(op->buffer);
    for (const Expr &i : op->indices) expr(i);
  }
  void visit(const ReduceNode *op, const Expr &) override {
    mix(static_cast<uint64_t>(op->combiner));
    for (const IterVar &iv : op->axes) {
      define(iv.var);
      mix(static_cast<uint64_t>(iv.extent));
    }
    expr(op->source);
  }
#define KILN_HASH_BINARY(N)                              \
  void visit(const N##Node *op, const Expr &) override { \
    expr(op->a);                                         \
    expr(op->b);                                         \
  }
  KILN_HASH_BINARY(Add)
  KILN_HASH_BINARY(Sub)
  KILN_HASH_BINARY(Mul)
  KILN_HASH_BINARY(Div)
  KILN_HASH_BINARY(FloorDiv)
  KILN_HASH_BINARY(FloorMod)
  KILN_HASH_BINARY(Min)
  KILN_HASH_BINARY(Max)
  KILN_HASH_BINARY(EQ)
  KILN_HASH_BINARY(NE)
  KILN_HASH_BINARY(LT)
  KILN_HASH_BINARY(LE)
  KILN_HASH_BINARY(GT)
  KILN_HASH_BINARY(GE)
  KILN_HASH_BINARY(And)
  KILN_HASH_BINARY(Or)
#undef KILN_HASH_BINARY
  void visit(const NotNode *op, const Expr &) override { expr(op->a); }
  void visit(const SelectNode *op, const Expr &) override {
    expr(op->cond);
    expr(op->true_value);
    expr(op->false_value);
  }
  void visit(const CastNode *op, const Expr &) override { expr(op->value); }

  void visit(const ForNode *op, const Stmt &) override {
    define(op->loop_var);
    mix(static_cast<uint64_t>(op->extent));
    mix(static_cast<uint64_t>(op->for_kind));
    mix(op->thread_tag);
    for (const auto &[k, v] : op->annotations) {
      mix(k);
      mix(static_cast<uint64_t>(v));
    }
    stmt(op->body);
  }
  void visit(const SeqNode *op, const Stmt &) override {
    mix(op->stmts.size());
    for (const Stmt &s : op->stmts) stmt(s);
  }
  void visit(const BlockNode *op, const Stmt &) override {
    mix(op->name);
    for (const Expr &v : op->iter_values) expr(v);
    for (const IterVar &iv : op->iter_vars) {
      define(iv.var);
      mix(static_cast<uint64_t>(iv.extent) * 2 + static_cast<uint64_t>(iv.kind));
    }
    for (const Buffer &b : op->alloc_buffers) define(b);
    for (const auto &[k, v] : op->annotations) {
      mix(k);
      mix(static_cast<uint64_t>(v));
    }
    expr(op->predicate);
    stmt(op->init);
    stmt(op->body);
  }
  void visit(const StoreNode *op, const Stmt &) override {
    mix_buffer(op->buffer);
    for (const Expr &i : op->indices) expr(i);
    expr(op->value);
  }
  void visit(const IfThenElseNode *op, const Stmt &) override {
    expr(op->cond);
    stmt(op->then_case);
    stmt(op->else_case);
  }
  void visit(const BarrierNode *, const Stmt &) override {}
  void visit(const ThreadAllReduceNode *op, const Stmt &) override {
    mix(static_cast<uint64_t>(op->combiner) * 7 + static_cast<uint64_t>(op->axis));
    mix(static_cast<uint64_t>(op->extent));
    mix_buffer(op->value);
    if (op->scratch) mix_buffer(op->scratch);
  }

 private:
  std::unordered_map<const VarNode *, uint64_t> vars_;
  std::unordered_map<const BufferNode *, uint64_t> buffers_;
  uint64_t next_id_ = 1;
};

}  // namespace

bool same_expr(const Expr &a, const Expr &b) { return EqualityChecker(/*by_identity=*/true).equal(a, b); }
bool structural_equal(const Expr &a, const Expr &b) { return EqualityChecker().equal(a, b); }
bool structural_equal(const Stmt &a, const Stmt &b) { return EqualityChecker().equal(a, b); }
bool structural_equal(const PrimFunc &a, const PrimFunc &b) {
  if (a.params.size() != b.params.size()) return false;
  EqualityChecker checker;
  for (size_t i = 0; i < a.params.size(); ++i)
    if (!checker.define_buffer(a.params[i], b.params[i])) return false;
  return checker.equal(a.body, b.body);
}

uint64_t structural_hash(const Expr &e) {
  Hasher h;
  h.expr(e);
  return h.h;
}
uint64_t structural_hash(const Stmt &s) {
  Hasher h;
  h.stmt(s);
  return h.h;
}
uint64_t structural_hash(const PrimFunc &f) {
  Hasher h;
  for (const Buffer &b : f.params) h.define(b);
  h.stmt(f.body);
  return h.h;
}

}  // namespace kiln::ir
