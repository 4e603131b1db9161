#include "ir/layout_rewrite.h"

#include <unordered_set>

#include "ir/functor.h"
#include "ir/schedule/analysis.h"

namespace kiln::ir {
namespace {

/// Where an intermediate buffer is allocated: the block and the loops around it.
struct AllocSite {
  const BlockNode *block = nullptr;
  std::vector<const ForNode *> loops;  // outermost first
};

bool find_alloc(const Stmt &s, const BufferNode *buffer, std::vector<const ForNode *> &loops, AllocSite *out) {
  if (const auto *l = s.as<ForNode>()) {
    loops.push_back(l);
    bool found = find_alloc(l->body, buffer, loops, out);
    loops.pop_back();
    return found;
  }
  if (const auto *b = s.as<BlockNode>()) {
    for (const Buffer &a : b->alloc_buffers)
      if (a.get() == buffer) {
        *out = AllocSite{b, loops};
        return true;
      }
    return find_alloc(b->body, buffer, loops, out);
  }
  if (const auto *q = s.as<SeqNode>()) {
    for (const Stmt &c : q->stmts)
      if (find_alloc(c, buffer, loops, out)) return true;
    return false;
  }
  if (const auto *i = s.as<IfThenElseNode>())
    return find_alloc(i->then_case, buffer, loops, out) ||
           (i->else_case.defined() && find_alloc(i->else_case, buffer, loops, out));
  return false;
}

std::vector<Stmt> children(const Stmt &body) {
  if (const auto *q = body.as<SeqNode>()) return q->stmts;
  return {body};
}

/// Accesses of the panel buffer become accesses of the packed buffer, led by the loop
/// variables the panel depends on.
RemapBuffer use_packed(const Buffer &panel, const Buffer &packed, const std::vector<Expr> &lead) {
  return RemapBuffer(panel, packed, [lead](const std::vector<Expr> &inner) {
    std::vector<Expr> out = lead;
    out.insert(out.end(), inner.begin(), inner.end());
    return out;
  });
}

Stmt zero_fill(const Buffer &b) {
  std::vector<Var> loop_vars;
  std::vector<IterVar> iters;
  std::vector<Expr> values, indices;
  for (size_t d = 0; d < b->shape.size(); ++d) {
    loop_vars.emplace_back("z" + std::to_string(d));
    iters.push_back(IterVar{Var("v" + std::to_string(d)), b->shape[d], IterKind::kSpatial});
    values.push_back(loop_vars.back());
    indices.push_back(iters.back().var);
  }
  Stmt s =
      make_block(b->name + "_zero", iters, values, Expr(), Stmt(), make_store(b, indices, make_const(b->dtype, 0)));
  for (size_t d = b->shape.size(); d-- > 0;) s = make_for(loop_vars[d], b->shape[d], ForKind::kSerial, s);
  return s;
}

// The one block reading `weight`, when it only copies the weight into an intermediate.
const BlockNode *sole_copy_of(const PrimFunc &f, const BufferNode *weight, Buffer *panel) {
  const BlockNode *copy = nullptr;
  for (const BlockNode *b : sched::all_blocks(f)) {
    if (sched::writes_buffer(b, weight)) return nullptr;
    if (!sched::reads_buffer(b, weight)) continue;
    if (copy) return nullptr;  // read twice: one packed layout cannot serve both
    copy = b;
  }
  if (!copy || copy->init.defined()) return nullptr;
  const auto *store = copy->body.as<StoreNode>();
  if (!store || store->buffer->scope == MemoryScope::kGlobal) return nullptr;
  bool only_weight = true;
  for_each_subexpr(store->value, [&](const Expr &e) {
    if (const auto *load = e.as<LoadNode>()) only_weight = only_weight && load->buffer.get() == weight;
  });
  if (!only_weight) return nullptr;
  for (const BlockNode *b : sched::all_blocks(f))
    if (b != copy && sched::writes_buffer(b, store->buffer.get())) return nullptr;
  *panel = store->buffer;
  return copy;
}

struct Packing {
  PrimFunc kernel;
  Stmt prepack;  // the packed buffer's fill
  PackedInput input;
};

std::optional<Packing> pack_ahead(const PrimFunc &f, size_t param) {
  const Buffer &weight = f.params[param];
  Buffer panel;
  const BlockNode *copy = sole_copy_of(f, weight.get(), &panel);
  if (!copy) return std::nullopt;
  std::vector<const ForNode *> stack;
  AllocSite site;
  if (!find_alloc(f.body, panel.get(), stack, &site)) return std::nullopt;
  // The statement under the allocating block that holds the copy, and nothing else.
  std::vector<Stmt> body = children(site.block->body);
  std::optional<size_t> nest;
  for (size_t i = 0; i < body.size(); ++i) {
    std::vector<const BlockNode *> blocks = sched::blocks_under(body[i]);
    if (std::find(blocks.begin(), blocks.end(), copy) == blocks.end()) continue;
    if (blocks.size() != 1) return std::nullopt;
    nest = i;
  }
  if (!nest) return std::nullopt;
  // The loops around the allocation that the copy depends on index the panels.
  std::unordered_set<const VarNode *> used;
  for_each_expr(body[*nest], [&](const Expr &e) {
    if (const auto *v = e.as<VarNode>()) used.insert(v);
  });
  std::vector<const ForNode *> panel_loops;
  std::vector<int64_t> shape;
  std::vector<Expr> lead;
  for (const ForNode *l : site.loops)
    if (used.count(l->loop_var.get())) {
      panel_loops.push_back(l);
      shape.push_back(l->extent);
      lead.push_back(l->loop_var);
    }
  shape.insert(shape.end(), panel->shape.begin(), panel->shape.end());
  Buffer packed = make_buffer(weight->name + "_packed", weight->dtype, shape);
  if (packed->num_elements() > 4 * weight->num_elements()) return std::nullopt;

  RemapBuffer use = use_packed(panel, packed, lead);
  Stmt fill = use.mutate(body[*nest]);
  for (size_t i = panel_loops.size(); i-- > 0;)
    fill = make_for(panel_loops[i]->loop_var, panel_loops[i]->extent, ForKind::kSerial, fill);

  std::vector<Stmt> rest = body;
  rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(*nest));
  std::vector<Buffer> allocs;
  for (const Buffer &a : site.block->alloc_buffers)
    if (a != panel) allocs.push_back(a);
  const BlockNode *a = site.block;
  Stmt without_copy =
      make_block(a->name, a->iter_vars, a->iter_values, a->predicate, a->init, make_seq(rest), allocs, a->annotations);
  Packing out;
  out.kernel = sched::with_body(f, use.mutate(sched::replace_stmt(f.body, a, without_copy)));
  out.kernel.params[param] = packed;
  out.prepack = make_seq({zero_fill(packed), fill});
  out.input = PackedInput{param, weight, packed};
  return out;
}

}  // namespace

LayoutRewrite rewrite_constant_layouts(const PrimFunc &f) {
  LayoutRewrite out;
  out.kernel = f;
  std::vector<Stmt> fills;
  std::vector<Buffer> prepack_params;
  for (size_t param : f.constant_params) {
    if (param >= f.params.size()) continue;
    std::optional<Packing> p = pack_ahead(out.kernel, param);
    if (!p) continue;
    out.kernel = std::move(p->kernel);
    fills.push_back(std::move(p->prepack));
    prepack_params.push_back(p->input.original);
    prepack_params.push_back(p->input.packed);
    out.packed.push_back(std::move(p->input));
  }
  if (out.packed.empty()) return out;
  PrimFunc prepack;
  prepack.name = f.name + "_prepack";
  prepack.params = std::move(prepack_params);
  prepack.body = make_block("root", {}, {}, Expr(), Stmt(), make_seq(std::move(fills)));
  out.prepack = std::move(prepack);
  return out;
}

}  // namespace kiln::ir
