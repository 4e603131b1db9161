// Readable text of expressions, loop programs and functions.
#include <sstream>

#include "ir/functor.h"

namespace kiln::ir {
namespace {

class Printer : public IRVisitor {
 public:
  std::ostringstream os;
  int indent = 0;

  void print_func(const PrimFunc &f) {
    os << "func " << f.name << "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (i) os << ", ";
      print_buffer_decl(f.params[i]);
    }
    os << ") {\n";
    indent = 1;
    visit_stmt(f.body);
    os << "}\n";
  }

 protected:
  void line() { os << std::string(2 * indent, ' '); }
  void print_buffer_decl(const Buffer &b) {
    os << b->name << ": " << dtype_name(b->dtype) << "[";
    for (size_t i = 0; i < b->shape.size(); ++i) os << (i ? ", " : "") << b->shape[i];
    os << "]";
    if (b->scope != MemoryScope::kGlobal) os << " @" << scope_name(b->scope);
  }
  void print_indices(const std::vector<Expr> &idx) {
    os << "[";
    for (size_t i = 0; i < idx.size(); ++i) {
      if (i) os << ", ";
      visit_expr(idx[i]);
    }
    os << "]";
  }
  void infix(const char *op, const Expr &a, const Expr &b) {
    os << "(";
    visit_expr(a);
    os << " " << op << " ";
    visit_expr(b);
    os << ")";
  }
  void call(const char *name, const Expr &a, const Expr &b) {
    os << name << "(";
    visit_expr(a);
    os << ", ";
    visit_expr(b);
    os << ")";
  }

  void visit(const IntImmNode *op, const Expr &) override {
    if (op->dtype == DType::kBool) {
      os << (op->value ? "true" : "false");
    } else {
      os << op->value;
      if (op->dtype != DType::kInt64) os << "i" << dtype_bytes(op->dtype) * 8;
    }
  }
  void visit(const FloatImmNode *op, const Expr &) override {
    std::ostringstream v;
    v.precision(9);
    v << op->value;
    os << v.str() << (op->dtype == DType::kFloat16 ? "h" : op->dtype == DType::kBFloat16 ? "bf" : "f");
  }
  void visit(const VarNode *op, const Expr &) override { os << op->name; }
  void visit(const AddNode *op, const Expr &) override { infix("+", op->a, op->b); }
  void visit(const SubNode *op, const Expr &) override { infix("-", op->a, op->b); }
  void visit(const MulNode *op, const Expr &) override { infix("*", op->a, op->b); }
  void visit(const DivNode *op, const Expr &) override { infix("/", op->a, op->b); }
  void visit(const FloorDivNode *op, const Expr &) override { call("floordiv", op->a, op->b); }
  void visit(const FloorModNode *op, const Expr &) override { call("floormod", op->a, op->b); }
  void visit(const MinNode *op, const Expr &) override { call("min", op->a, op->b); }
  void visit(const MaxNode *op, const Expr &) override { call("max", op->a, op->b); }
  void visit(const EQNode *op, const Expr &) override { infix("==", op->a, op->b); }
  void visit(const NENode *op, const Expr &) override { infix("!=", op->a, op->b); }
  void visit(const LTNode *op, const Expr &) override { infix("<", op->a, op->b); }
  void visit(const LENode *op, const Expr &) override { infix("<=", op->a, op->b); }
  void visit(const GTNode *op, const Expr &) override { infix(">", op->a, op->b); }
  void visit(const GENode *op, const Expr &) override { infix(">=", op->a, op->b); }
  void visit(const AndNode *op, const Expr &) override { infix("&&", op->a, op->b); }
  void visit(const OrNode *op, const Expr &) override { infix("||", op->a, op->b); }
  void visit(const NotNode *op, const Expr &) override {
    os << "!";
    visit_expr(op->a);
  }
  void visit(const SelectNode *op, const Expr &) override {
    os << "select(";
    visit_expr(op->cond);
    os << ", ";
    visit_expr(op->true_value);
    os << ", ";
    visit_expr(op->false_value);
    os << ")";
  }
  void visit(const CastNode *op, const Expr &) override {
    os << dtype_name(op->dtype) << "(";
    visit_expr(op->value);
    os << ")";
  }
  void visit(const CallNode *op, const Expr &) override {
    os << intrinsic_name(op->op) << "(";
    for (size_t i = 0; i < op->args.size(); ++i) {
      if (i) os << ", ";
      visit_expr(op->args[i]);
    }
    os << ")";
  }
  void visit(const LoadNode *op, const Expr &) override {
    os << op->buffer->name;
    print_indices(op->indices);
  }
  void visit(const ReduceNode *op, const Expr &) override {
    os << combiner_name(op->combiner) << "(";
    visit_expr(op->source);
    os << ", axes=[";
    for (size_t i = 0; i < op->axes.size(); ++i) {
      os << (i ? ", " : "") << op->axes[i].var.name() << ":" << op->axes[i].extent;
    }
    os << "])";
  }

  void visit(const ForNode *op, const Stmt &) override {
    line();
    os << "for " << op->loop_var.name() << " in " << op->extent;
    if (op->for_kind != ForKind::kSerial) os << " " << for_kind_name(op->for_kind);
    if (!op->thread_tag.empty()) os << "(" << op->thread_tag << ")";
    for (const auto &[k, v] : op->annotations) os << " @" << k << "=" << v;
    os << ":\n";
    ++indent;
    visit_stmt(op->body);
    --indent;
  }
  void visit(const SeqNode *op, const Stmt &) override {
    for (const Stmt &s : op->stmts) visit_stmt(s);
  }
  void visit(const BlockNode *op, const Stmt &) override {
    line();
    os << "block " << op->name << "(";
    for (size_t i = 0; i < op->iter_vars.size(); ++i) {
      const IterVar &iv = op->iter_vars[i];
      if (i) os << ", ";
      os << iv.var.name() << (iv.kind == IterKind::kReduce ? ":R" : ":S") << iv.extent << "=";
      visit_expr(op->iter_values[i]);
    }
    os << ")";
    if (!is_const_int(op->predicate, 1)) {
      os << " where ";
      visit_expr(op->predicate);
    }
    for (const auto &[k, v] : op->annotations) os << " @" << k << "=" << v;
    os << ":\n";
    ++indent;
    for (const Buffer &b : op->alloc_buffers) {
      line();
      os << "alloc ";
      print_buffer_decl(b);
      os << "\n";
    }
    if (op->init.defined()) {
      line();
      os << "init:\n";
      ++indent;
      visit_stmt(op->init);
      --indent;
    }
    visit_stmt(op->body);
    --indent;
  }
  void visit(const StoreNode *op, const Stmt &) override {
    line();
    os << op->buffer->name;
    print_indices(op->indices);
    os << " = ";
    visit_expr(op->value);
    os << "\n";
  }
  void visit(const BarrierNode *, const Stmt &) override {
    line();
    os << "barrier\n";
  }
  void visit(const ThreadAllReduceNode *op, const Stmt &) override {
    line();
    os << op->value->name << "[0] = " << combiner_name(op->combiner) << " over " << op->extent << " threads along "
       << "xyz"[op->axis];
    if (op->scratch) os << " (through " << op->scratch->name << ")";
    os << "\n";
  }
  void visit(const IfThenElseNode *op, const Stmt &) override {
    line();
    os << "if ";
    visit_expr(op->cond);
    os << ":\n";
    ++indent;
    visit_stmt(op->then_case);
    --indent;
    if (op->else_case.defined()) {
      line();
      os << "else:\n";
      ++indent;
      visit_stmt(op->else_case);
      --indent;
    }
  }
};

}  // namespace

std::string to_string(const Expr &e) {
  if (!e.defined()) return "<undefined>";
  Printer p;
  p.visit_expr(e);
  return p.os.str();
}

std::string to_string(const Stmt &s) {
  if (!s.defined()) return "<undefined>\n";
  Printer p;
  p.visit_stmt(s);
  return p.os.str();
}

std::string to_string(const PrimFunc &f) {
  Printer p;
  p.print_func(f);
  return p.os.str();
}

}  // namespace kiln::ir
