// The walk that turns a lowered program into store sites (see store_sites.h).

#include "costmodel/store_sites.h"

#include <algorithm>
#include <unordered_map>

#include "ir/annotations.h"
#include "ir/functor.h"

namespace kiln::costmodel {

namespace {

enum OpSlot : size_t {
  kFloatMad,
  kFloatAddSub,
  kFloatMul,
  kFloatDivMod,
  kFloatCmp,
  kFloatMathFunc,
  kIntAddSub,
  kIntMul,
  kIntDivMod,
  kIntCmp,
  kBoolOp,
  kSelectOp,
  kCastOp,
};

/// Counts the operations of one evaluation of an expression. a*b+c in floating point
/// counts as one multiply-add because codegen contracts it to an FMA.
class OpCounter : public ir::IRVisitor {
 public:
  explicit OpCounter(OpCounts *counts) : counts_(counts) {}

 protected:
  using IRVisitor::visit;

  void count(const ir::Expr &self, OpSlot float_slot, OpSlot int_slot) {
    ++(*counts_)[ir::is_float(self.dtype()) ? float_slot : int_slot];
  }

  void visit(const ir::AddNode *op, const ir::Expr &self) override {
    const ir::MulNode *mul = ir::is_float(self.dtype()) ? op->a.as<ir::MulNode>() : nullptr;
    const ir::Expr *other = &op->b;
    if (mul == nullptr && ir::is_float(self.dtype())) {
      mul = op->b.as<ir::MulNode>();
      other = &op->a;
    }
    if (mul == nullptr) {
      count(self, kFloatAddSub, kIntAddSub);
      IRVisitor::visit(op, self);
      return;
    }
    ++(*counts_)[kFloatMad];
    visit_expr(mul->a);
    visit_expr(mul->b);
    visit_expr(*other);
  }
  void visit(const ir::SubNode *op, const ir::Expr &self) override {
    count(self, kFloatAddSub, kIntAddSub);
    IRVisitor::visit(op, self);
  }
  void visit(const ir::MulNode *op, const ir::Expr &self) override {
    count(self, kFloatMul, kIntMul);
    IRVisitor::visit(op, self);
  }
  void visit(const ir::DivNode *op, const ir::Expr &self) override {
    count(self, kFloatDivMod, kIntDivMod);
    IRVisitor::visit(op, self);
  }
  void visit(const ir::FloorDivNode *op, const ir::Expr &self) override {
    count(self, kFloatDivMod, kIntDivMod);
    IRVisitor::visit(op, self);
  }
  void visit(const ir::FloorModNode *op, const ir::Expr &self) override {
    count(self, kFloatDivMod, kIntDivMod);
    IRVisitor::visit(op, self);
  }
  void visit(const ir::MinNode *op, const ir::Expr &self) override {
    count(self, kFloatCmp, kIntCmp);
    IRVisitor::visit(op, self);
  }
  void visit(const ir::MaxNode *op, const ir::Expr &self) override {
    count(self, kFloatCmp, kIntCmp);
    IRVisitor::visit(op, self);
  }
  // Comparisons are typed by their operands, not by their boolean result.
#define KILN_COUNT_CMP(N)                                            \
  void visit(const ir::N##Node *op, const ir::Expr &self) override { \
    ++(*counts_)[ir::is_float(op->a.dtype()) ? kFloatCmp : kIntCmp]; \
    IRVisitor::visit(op, self);                                      \
  }
  KILN_COUNT_CMP(EQ)
  KILN_COUNT_CMP(NE)
  KILN_COUNT_CMP(LT)
  KILN_COUNT_CMP(LE)
  KILN_COUNT_CMP(GT)
  KILN_COUNT_CMP(GE)
#undef KILN_COUNT_CMP
  void visit(const ir::AndNode *op, const ir::Expr &self) override {
    ++(*counts_)[kBoolOp];
    IRVisitor::visit(op, self);
  }
  void visit(const ir::OrNode *op, const ir::Expr &self) override {
    ++(*counts_)[kBoolOp];
    IRVisitor::visit(op, self);
  }
  void visit(const ir::NotNode *op, const ir::Expr &self) override {
    ++(*counts_)[kBoolOp];
    IRVisitor::visit(op, self);
  }
  void visit(const ir::SelectNode *op, const ir::Expr &self) override {
    ++(*counts_)[kSelectOp];
    IRVisitor::visit(op, self);
  }
  void visit(const ir::CastNode *op, const ir::Expr &self) override {
    ++(*counts_)[kCastOp];
    IRVisitor::visit(op, self);
  }
  void visit(const ir::CallNode *op, const ir::Expr &self) override {
    ++(*counts_)[kFloatMathFunc];
    IRVisitor::visit(op, self);
  }

 private:
  OpCounts *counts_;
};

static void count_ops(const ir::Expr &e, OpCounts *counts) {
  if (!e.defined()) return;
  OpCounter counter(counts);
  counter.visit_expr(e);
}

static int64_t annotation_value(const ir::Annotations &annotations, const char *key) {
  auto it = annotations.find(key);
  return it == annotations.end() ? 0 : it->second;
}

/// The walk itself. Block iterators are replaced by their bindings as blocks are
/// entered, so every recorded index is in terms of loop variables only.
class SiteCollector : public ir::IRVisitor {
 public:
  StoreSites result;

 protected:
  using IRVisitor::visit;

  void visit(const ir::ForNode *op, const ir::Stmt &) override {
    int id = static_cast<int>(result.loops.size());
    result.loops.push_back(LoopInfo{op->loop_var, std::max<int64_t>(op->extent, 1), op->for_kind, op->thread_tag});
    stack_.push_back(id);
    int64_t saved_unroll = auto_unroll_;
    auto_unroll_ = std::max(auto_unroll_, annotation_value(op->annotations, ir::annotation::kAutoUnrollMaxStep));
    visit_stmt(op->body);
    auto_unroll_ = saved_unroll;
    stack_.pop_back();
  }

  void visit(const ir::BlockNode *op, const ir::Stmt &) override {
    std::vector<const ir::VarNode *> bound;
    std::vector<const ir::VarNode *> added_reduce;
    for (size_t k = 0; k < op->iter_vars.size() && k < op->iter_values.size(); ++k) {
      ir::Expr value = ir::substitute(op->iter_values[k], subst_);
      if (op->iter_vars[k].kind == ir::IterKind::kReduce) {
        ir::for_each_subexpr(value, [&](const ir::Expr &x) {
          if (const auto *v = x.as<ir::VarNode>(); v != nullptr && reduce_vars_.insert(v).second) {
            added_reduce.push_back(v);
          }
        });
      }
      subst_[op->iter_vars[k].var.get()] = value;
      bound.push_back(op->iter_vars[k].var.get());
    }
    for (const ir::Buffer &b : op->alloc_buffers) alloc_depth_[b.get()] = static_cast<int>(stack_.size());
    OpCounts saved_guard = guard_ops_;
    if (op->predicate.defined()) count_ops(ir::substitute(op->predicate, subst_), &guard_ops_);
    int64_t saved_unroll = auto_unroll_;
    auto_unroll_ = std::max(auto_unroll_, annotation_value(op->annotations, ir::annotation::kAutoUnrollMaxStep));

    if (op->init.defined()) visit_stmt(op->init);
    visit_stmt(op->body);

    auto_unroll_ = saved_unroll;
    guard_ops_ = saved_guard;
    for (const ir::VarNode *v : added_reduce) reduce_vars_.erase(v);
    for (const ir::VarNode *v : bound) subst_.erase(v);
  }

  void visit(const ir::IfThenElseNode *op, const ir::Stmt &) override {
    // Both branches are counted, each with the condition's cost (as Ansor does).
    OpCounts saved_guard = guard_ops_;
    count_ops(ir::substitute(op->cond, subst_), &guard_ops_);
    visit_stmt(op->then_case);
    if (op->else_case.defined()) visit_stmt(op->else_case);
    guard_ops_ = saved_guard;
  }

  void visit(const ir::StoreNode *op, const ir::Stmt &) override {
    StoreSite site;
    site.buffer = op->buffer;
    site.loops = stack_;
    site.reduce_vars = reduce_vars_;
    site.auto_unroll_max_step = auto_unroll_;
    auto alloc = alloc_depth_.find(op->buffer.get());
    site.alloc_depth = alloc == alloc_depth_.end() ? -1 : alloc->second;
    site.ops = guard_ops_;

    ir::Expr value = ir::substitute(op->value, subst_);
    std::vector<ir::Expr> indices;
    indices.reserve(op->indices.size());
    for (const ir::Expr &i : op->indices) {
      indices.push_back(ir::substitute(i, subst_));
      count_ops(indices.back(), &site.ops);
    }
    count_ops(value, &site.ops);

    site.accesses.push_back(BufferAccess{op->buffer, AccessType::kWrite, {indices}});
    auto add_read = [&](const ir::Expr &x) {
      const auto *load = x.as<ir::LoadNode>();
      if (load == nullptr) return;
      auto it = std::find_if(site.accesses.begin(), site.accesses.end(),
                             [&](const BufferAccess &a) { return a.buffer.get() == load->buffer.get(); });
      if (it == site.accesses.end()) {
        site.accesses.push_back(BufferAccess{load->buffer, AccessType::kRead, {load->indices}});
        return;
      }
      if (it->type == AccessType::kWrite) it->type = AccessType::kReadWrite;
      it->indices.push_back(load->indices);
    };
    ir::for_each_subexpr(value, add_read);
    for (const ir::Expr &i : indices) ir::for_each_subexpr(i, add_read);
    result.sites.push_back(std::move(site));
  }

 private:
  std::vector<int> stack_;
  ir::VarMap subst_;
  std::unordered_set<const ir::VarNode *> reduce_vars_;
  std::unordered_map<const ir::BufferNode *, int> alloc_depth_;
  OpCounts guard_ops_{};
  int64_t auto_unroll_ = 0;
};

}  // namespace

StoreSites collect_store_sites(const ir::PrimFunc &lowered) {
  SiteCollector collector;
  collector.visit_stmt(lowered.body);
  return std::move(collector.result);
}

}  // namespace kiln::costmodel
