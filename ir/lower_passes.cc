#include "ir/lower_passes.h"

#include <unordered_set>

#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::ir {
namespace {

// Loop variables an expression uses.
std::unordered_set<const VarNode *> vars_of(const Expr &e) {
  std::unordered_set<const VarNode *> vars;
  for_each_subexpr(e, [&](const Expr &x) {
    if (const auto *v = x.as<VarNode>()) vars.insert(v);
  });
  return vars;
}

// Splits a conjunction into its terms.
void conjuncts(const Expr &e, std::vector<Expr> *out) {
  if (const auto *a = e.as<AndNode>()) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else if (!is_const_int(e, 1)) {
    out->push_back(e);
  }
}

class Decomposer : public IRMutator {
 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    loops_.push_back(op);
    Stmt body = mutate(op->body);
    loops_.pop_back();
    Stmt result = body.same_as(op->body) ? self : with_body(op, body);
    // Init nests that must run right before this loop.
    auto it = pending_.find(op);
    if (it == pending_.end()) return result;
    std::vector<Stmt> seq = std::move(it->second);
    pending_.erase(it);
    seq.push_back(result);
    return make_seq(std::move(seq));
  }

  Stmt visit(const BlockNode *op, const Stmt &self) override {
    Stmt mutated = IRMutator::visit(op, self);
    const auto *b = mutated.as<BlockNode>();
    if (!b->init.defined() || loops_.empty()) return mutated;
    std::unordered_set<const VarNode *> reduce_vars, spatial_vars;
    for (size_t k = 0; k < b->iter_vars.size(); ++k) {
      auto vars = vars_of(b->iter_values[k]);
      (b->iter_vars[k].kind == IterKind::kReduce ? reduce_vars : spatial_vars).insert(vars.begin(), vars.end());
    }
    // The outermost loop that drives a reduction iterator.
    size_t first_reduce = loops_.size();
    for (size_t i = 0; i < loops_.size(); ++i) {
      const VarNode *v = loops_[i]->loop_var.get();
      if (spatial_vars.count(v) && reduce_vars.count(v)) return mutated;  // mixed loop: keep the init
      if (reduce_vars.count(v) && first_reduce == loops_.size()) first_reduce = i;
    }
    if (first_reduce == loops_.size()) return mutated;  // no reduction loop: init runs every time anyway
    // Copy the spatial loops below it; loops that drive reductions are dropped (their
    // iterators are 0 at the init).
    VarMap fresh;
    std::vector<const ForNode *> kept;
    for (size_t i = first_reduce; i < loops_.size(); ++i) {
      const ForNode *l = loops_[i];
      if (reduce_vars.count(l->loop_var.get())) {
        fresh[l->loop_var.get()] = make_int(0);
      } else {
        kept.push_back(l);
        fresh[l->loop_var.get()] = Var(l->loop_var.name() + "_init");
      }
    }
    std::vector<Expr> values;
    std::vector<IterVar> iters;
    std::vector<Expr> spatial_values;
    for (size_t k = 0; k < b->iter_vars.size(); ++k) {
      if (b->iter_vars[k].kind == IterKind::kReduce) continue;
      iters.push_back(b->iter_vars[k]);
      values.push_back(substitute(b->iter_values[k], fresh));
    }
    // Keep the predicate terms that do not involve reduction loops.
    std::vector<Expr> terms, kept_terms;
    conjuncts(b->predicate, &terms);
    for (const Expr &t : terms) {
      bool uses_reduce = false;
      for (const VarNode *v : vars_of(t)) uses_reduce = uses_reduce || reduce_vars.count(v);
      if (!uses_reduce) kept_terms.push_back(substitute(t, fresh));
    }
    Expr pred = make_int(1, DType::kBool);
    for (const Expr &t : kept_terms) pred = make_and(pred, t);
    Stmt init = make_block(b->name + "_init", iters, values, pred, Stmt(), b->init);
    for (size_t i = kept.size(); i-- > 0;) {
      const ForNode *l = kept[i];
      init = make_for(Var(fresh[l->loop_var.get()].node()), l->extent, l->for_kind, init, l->thread_tag);
    }
    pending_[loops_[first_reduce]].push_back(init);
    return make_block(b->name, b->iter_vars, b->iter_values, b->predicate, Stmt(), b->body, b->alloc_buffers,
                      b->annotations);
  }

 private:
  std::vector<const ForNode *> loops_;
  std::unordered_map<const ForNode *, std::vector<Stmt>> pending_;
};

}  // namespace

PrimFunc decompose_reductions(const PrimFunc &f) {
  PrimFunc g = f;
  Decomposer d;
  g.body = d.mutate(f.body);
  return g;
}

}  // namespace kiln::ir
