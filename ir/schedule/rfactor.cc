// rfactor: split a reduction into a partial reduction over one loop's iterations (into
// a new buffer with an extra dimension) and a final reduction of the partials.
#include <unordered_set>

#include "ir/functor.h"
#include "ir/schedule/primitives.h"

namespace kiln::ir::sched {

PrimFunc rfactor(const PrimFunc &f, const Var &loop_var, int factor_axis, std::string *rf_block) {
  const std::string primitive = "rfactor";
  Stmt loop_stmt = find_loop(f, loop_var.get());
  if (!loop_stmt.defined()) throw ScheduleError(primitive, "loop '" + loop_var.name() + "' no longer exists");
  const auto *loop = loop_stmt.as<ForNode>();
  std::vector<const BlockNode *> under = blocks_under(loop_stmt);
  if (under.size() != 1)
    throw ScheduleError(primitive,
                        describe_loop(loop) + " must contain exactly one block, found " + std::to_string(under.size()));
  const BlockNode *b = under[0];
  const auto *store = b->body.as<StoreNode>();
  if (!b->init.defined() || !store)
    throw ScheduleError(primitive, "block '" + b->name + "' is not a reduction (it needs an init and a single update)");
  // Recognize out[s] = combine(out[s], source).
  Combiner combiner;
  Expr lhs, source;
  if (const auto *a = store->value.as<AddNode>()) {
    combiner = Combiner::kSum, lhs = a->a, source = a->b;
  } else if (const auto *m = store->value.as<MaxNode>()) {
    combiner = Combiner::kMax, lhs = m->a, source = m->b;
  } else if (const auto *m = store->value.as<MinNode>()) {
    combiner = Combiner::kMin, lhs = m->a, source = m->b;
  } else {
    throw ScheduleError(primitive, "block '" + b->name + "' does not update its output with +, max or min");
  }
  const auto *self_load = lhs.as<LoadNode>();
  if (!self_load || self_load->buffer != store->buffer)
    throw ScheduleError(primitive, "block '" + b->name + "' does not accumulate into its output");
  Buffer out = store->buffer;
  if (factor_axis < 0 || factor_axis > static_cast<int>(out->shape.size()))
    throw ScheduleError(primitive, "factor axis " + std::to_string(factor_axis) + " is outside [0, " +
                                       std::to_string(out->shape.size()) + "]");
  // Classify the loops above the block.
  std::vector<Stmt> loops = loops_above(f, b);
  std::unordered_set<const VarNode *> reduce_loops, spatial_loops;
  for (size_t k = 0; k < b->iter_vars.size(); ++k) {
    for (const Stmt &ls : loops) {
      const auto *l = ls.as<ForNode>();
      if (!uses_var(b->iter_values[k], l->loop_var.get())) continue;
      (b->iter_vars[k].kind == IterKind::kReduce ? reduce_loops : spatial_loops).insert(l->loop_var.get());
    }
  }
  if (!reduce_loops.count(loop->loop_var.get()))
    throw ScheduleError(primitive,
                        describe_loop(loop) + " does not drive a reduction iterator of block '" + b->name + "'");
  for (const VarNode *v : reduce_loops)
    if (spatial_loops.count(v))
      throw ScheduleError(
          primitive, "loop '" + v->name + "' drives both spatial and reduction iterators of block '" + b->name + "'");
  if (uses_var(b->predicate, loop->loop_var.get()))
    throw ScheduleError(primitive, describe_loop(loop) + " comes from a non-divisible split (block '" + b->name +
                                       "' has a predicate on it); partial results would be left uninitialized");
  for (const BlockNode *other : all_blocks(f)) {
    if (other != b && reads_buffer(other, out.get()) && root_level_stmt(f, other).same_as(root_level_stmt(f, b)))
      throw ScheduleError(primitive, "block '" + other->name + "' reads '" + out->name +
                                         "' inside the same loop nest; the final reduction would come too late");
  }

  // The rfactor block: spatial iterators of b, the factored loop as a new spatial
  // iterator, and one reduction iterator per other reduction loop.
  std::vector<int64_t> rf_shape = out->shape;
  rf_shape.insert(rf_shape.begin() + factor_axis, loop->extent);
  Buffer rf_buf = make_buffer(fresh_buffer_name(f, out->name + "_rf"), out->dtype, rf_shape, out->scope);
  std::vector<IterVar> iters;
  std::vector<Expr> values;
  VarMap loop_to_iter, iter_subst;
  for (size_t k = 0; k < b->iter_vars.size(); ++k) {
    if (b->iter_vars[k].kind != IterKind::kSpatial) continue;
    Var v(b->iter_vars[k].var.name());
    iters.push_back(IterVar{v, b->iter_vars[k].extent, IterKind::kSpatial});
    values.push_back(b->iter_values[k]);
    iter_subst[b->iter_vars[k].var.get()] = v;
  }
  Var rf_iter("v" + loop->loop_var.name());
  for (const Stmt &ls : loops) {
    const auto *l = ls.as<ForNode>();
    if (!reduce_loops.count(l->loop_var.get())) continue;
    bool is_rf = l == loop;
    Var v = is_rf ? rf_iter : Var("v" + l->loop_var.name());
    iters.push_back(IterVar{v, l->extent, is_rf ? IterKind::kSpatial : IterKind::kReduce});
    values.push_back(l->loop_var);
    loop_to_iter[l->loop_var.get()] = v;
  }
  for (size_t k = 0; k < b->iter_vars.size(); ++k) {
    if (b->iter_vars[k].kind == IterKind::kReduce)
      iter_subst[b->iter_vars[k].var.get()] = substitute(b->iter_values[k], loop_to_iter);
  }
  std::vector<Expr> rf_idx;
  for (const Expr &i : store->indices) rf_idx.push_back(substitute(i, iter_subst));
  rf_idx.insert(rf_idx.begin() + factor_axis, rf_iter);
  Expr rf_source = substitute(source, iter_subst);
  Stmt rf_init = make_store(rf_buf, rf_idx, combiner_identity(combiner, out->dtype));
  Stmt rf_body = make_store(rf_buf, rf_idx, combine(combiner, make_load(rf_buf, rf_idx), rf_source));
  *rf_block = fresh_block_name(f, b->name + "_rf");
  Stmt rf = make_block(*rf_block, iters, values, b->predicate, rf_init, rf_body, b->alloc_buffers, b->annotations);

  // The write-back block keeps the original name: out[s] = combine over the partials.
  std::vector<IterVar> wb_iters;
  std::vector<Expr> wb_values, wb_out_idx;
  std::vector<Var> wb_loops;
  for (size_t d = 0; d < out->shape.size(); ++d) {
    Var iv("v" + std::to_string(d)), lv("ax" + std::to_string(d));
    wb_iters.push_back(IterVar{iv, out->shape[d], IterKind::kSpatial});
    wb_values.push_back(lv);
    wb_out_idx.push_back(iv);
    wb_loops.push_back(lv);
  }
  Var red_iter("v" + loop->loop_var.name()), red_loop(loop->loop_var.name() + "_rf");
  wb_iters.push_back(IterVar{red_iter, loop->extent, IterKind::kReduce});
  wb_values.push_back(red_loop);
  std::vector<Expr> wb_rf_idx = wb_out_idx;
  wb_rf_idx.insert(wb_rf_idx.begin() + factor_axis, red_iter);
  Stmt wb = make_block(
      b->name, wb_iters, wb_values, Expr(), make_store(out, wb_out_idx, combiner_identity(combiner, out->dtype)),
      make_store(out, wb_out_idx, combine(combiner, make_load(out, wb_out_idx), make_load(rf_buf, wb_rf_idx))));
  wb = make_for(red_loop, loop->extent, ForKind::kSerial, wb);
  for (size_t d = wb_loops.size(); d-- > 0;) wb = make_for(wb_loops[d], out->shape[d], ForKind::kSerial, wb);

  const StmtNode *block_node = path_to(f.body, b).back().get();
  Stmt anchor = root_level_stmt(f, b);
  // Replace the block inside its root-level nest, then append the write-back nest.
  Stmt new_anchor = anchor.get() == block_node ? rf : replace_stmt(anchor, block_node, rf);
  Stmt root_body = f.root()->body;
  std::vector<Stmt> stmts = root_body.as<SeqNode>() ? root_body.as<SeqNode>()->stmts : std::vector<Stmt>{root_body};
  std::vector<Stmt> out_stmts;
  for (const Stmt &s : stmts) {
    if (s.same_as(anchor)) {
      out_stmts.push_back(new_anchor);
      out_stmts.push_back(wb);
    } else {
      out_stmts.push_back(s);
    }
  }
  const BlockNode *root = f.root();
  PrimFunc g = with_body(f, make_block(root->name, root->iter_vars, root->iter_values, root->predicate, root->init,
                                       make_seq(std::move(out_stmts)), root->alloc_buffers, root->annotations));
  return simplify_func(add_root_alloc(g, rf_buf));
}

}  // namespace kiln::ir::sched
