#include "ir/lower_passes.h"

#include <optional>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/schedule/analysis.h"
#include "ir/simplify.h"
#include "ir/structural.h"

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

namespace {

// Rewrites accesses of one buffer to a compacted copy: index d becomes index - min[d].
// Accesses of a compacted buffer, relative to the region's corner.
RemapBuffer rebase(const Buffer &from, const Buffer &to, const std::vector<Expr> &min) {
  return RemapBuffer(from, to, [min](std::vector<Expr> indices) {
    for (size_t d = 0; d < indices.size(); ++d) indices[d] = make_sub(indices[d], min[d]);
    return indices;
  });
}

// For each buffer the blocks that read or write it (program order), and for each block
// the loops above it (outermost first), from one walk of a program: asked buffer by
// buffer, each question walked the whole program, quadratic in its stages (a workload
// of thousands of operators took minutes to compile).
struct BufferUsers {
  std::unordered_map<const BufferNode *, std::vector<const BlockNode *>> users;
  std::unordered_map<const BlockNode *, std::vector<Stmt>> loops_above;

  explicit BufferUsers(const PrimFunc &f) {
    std::vector<Stmt> enclosing;
    record_loops(f.body, enclosing);
    for (const BlockNode *b : sched::all_blocks(f)) {
      std::vector<const BufferNode *> seen;
      auto add = [&](const std::vector<sched::Access> &accesses) {
        for (const sched::Access &a : accesses) {
          if (std::find(seen.begin(), seen.end(), a.buffer.get()) != seen.end()) continue;
          seen.push_back(a.buffer.get());
          users[a.buffer.get()].push_back(b);
        }
      };
      add(sched::block_reads(b));
      add(sched::block_writes(b));
    }
  }

 private:
  void record_loops(const Stmt &s, std::vector<Stmt> &enclosing) {
    if (const auto *l = s.as<ForNode>()) {
      enclosing.push_back(s);
      record_loops(l->body, enclosing);
      enclosing.pop_back();
    } else if (const auto *b = s.as<BlockNode>()) {
      loops_above.emplace(b, enclosing);
      if (b->init.defined()) record_loops(b->init, enclosing);
      record_loops(b->body, enclosing);
    } else if (const auto *q = s.as<SeqNode>()) {
      for (const Stmt &c : q->stmts) record_loops(c, enclosing);
    } else if (const auto *i = s.as<IfThenElseNode>()) {
      record_loops(i->then_case, enclosing);
      if (i->else_case.defined()) record_loops(i->else_case, enclosing);
    }
  }
};

// The deepest loop enclosing every given block; nullptr when only the root does.
const ForNode *common_loop(const BufferUsers &index, const std::vector<const BlockNode *> &blocks) {
  std::vector<Stmt> common;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::vector<Stmt> &loops = index.loops_above.at(blocks[i]);
    if (i == 0) {
      common = loops;
      continue;
    }
    size_t n = 0;
    while (n < common.size() && n < loops.size() && common[n].same_as(loops[n])) ++n;
    common.resize(n);
  }
  return common.empty() ? nullptr : common.back().as<ForNode>();
}

// True when a loop at or above `loop` drives a reduction iterator of a block writing
// `buffer`: partial results must then outlive one iteration of `loop`.
bool reduction_spans_loop(const PrimFunc &f, const Buffer &buffer, const std::vector<const BlockNode *> &blocks,
                          const ForNode *loop) {
  std::vector<Stmt> outer = sched::path_to(f.body, loop);
  for (const BlockNode *b : blocks) {
    if (!sched::writes_buffer(b, buffer.get())) continue;
    for (size_t k = 0; k < b->iter_vars.size(); ++k) {
      if (b->iter_vars[k].kind != IterKind::kReduce) continue;
      for (const Stmt &s : outer)
        if (const auto *l = s.as<ForNode>(); l && uses_var(b->iter_values[k], l->loop_var.get())) return true;
    }
  }
  return false;
}

// Collects offset = sum(coef * var) over plain loop variables; false for other forms.
// A zero offset has no terms (a dimension of extent 1, such as the batch).
bool affine_terms(const Expr &e, int64_t scale, std::vector<std::pair<const VarNode *, int64_t>> *terms) {
  if (is_const_int(e, 0)) return true;
  if (const auto *v = e.as<VarNode>()) {
    terms->emplace_back(v, scale);
    return true;
  }
  if (const auto *a = e.as<AddNode>()) return affine_terms(a->a, scale, terms) && affine_terms(a->b, scale, terms);
  if (const auto *m = e.as<MulNode>()) {
    int64_t c;
    if (as_const_int(m->b, &c)) return affine_terms(m->a, scale * c, terms);
    if (as_const_int(m->a, &c)) return affine_terms(m->b, scale * c, terms);
  }
  return false;
}

// True when `offset`, as the loops below vary, visits every position of [0, extent):
// a mixed-radix number whose digits are distinct inner loops (e.g. j1*8 + j2 with
// j2 < 8, j1 < 2 covers [0, 16)).
bool dense_cover(const Expr &offset, const std::unordered_map<const VarNode *, int64_t> &inner, int64_t extent,
                 std::unordered_set<const VarNode *> *used) {
  std::vector<std::pair<const VarNode *, int64_t>> terms;
  if (!affine_terms(offset, 1, &terms)) return false;
  std::sort(terms.begin(), terms.end(), [](const auto &x, const auto &y) { return x.second < y.second; });
  int64_t radix = 1;
  for (const auto &[v, coef] : terms) {
    auto it = inner.find(v);
    if (it == inner.end() || coef != radix || !used->insert(v).second) return false;
    radix *= it->second;
  }
  return radix >= extent;
}

// True when every conjunct of the writer's predicate only keeps its writes inside the
// buffer: `index < extent` of one dimension it writes (the partial tile of a tiling that
// does not divide the loop). Such a writer covers the region's in-bounds part, which
// is all that any access can touch.
bool predicate_only_bounds_writes(const BlockNode *b, const Buffer &buffer, const VarMap &bindings) {
  std::vector<Expr> terms;
  conjuncts(b->predicate, &terms);
  for (const Expr &t : terms) {
    const auto *lt = t.as<LTNode>();
    if (!lt || !lt->b.as<IntImmNode>()) return false;
    Expr bound = simplify(lt->a);
    bool bounds_a_dimension = false;
    for (const sched::Access &a : sched::block_writes(b)) {
      if (a.buffer != buffer) continue;
      for (size_t d = 0; d < a.indices.size(); ++d)
        bounds_a_dimension =
            bounds_a_dimension || (lt->b.as<IntImmNode>()->value == buffer->shape[d] &&
                                   structural_equal(simplify(substitute(a.indices[d], bindings)), bound));
    }
    if (!bounds_a_dimension) return false;
  }
  return true;
}

// The integer value of `e` with every variable it uses given in `values`; nullopt for
// any other form (a load, a float).
std::optional<int64_t> evaluate_int(const Expr &e, const std::unordered_map<const VarNode *, int64_t> &values) {
  if (const auto *i = e.as<IntImmNode>()) return i->value;
  if (const auto *v = e.as<VarNode>()) {
    auto it = values.find(v);
    return it == values.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }
  if (const auto *c = e.as<CastNode>())
    return is_float(c->value.dtype()) ? std::nullopt : evaluate_int(c->value, values);
  if (const auto *n = e.as<NotNode>()) {
    auto a = evaluate_int(n->a, values);
    return a ? std::optional<int64_t>(*a == 0) : std::nullopt;
  }
  auto binary = [&](const Expr &a, const Expr &b, auto op) -> std::optional<int64_t> {
    if (is_float(a.dtype())) return std::nullopt;
    auto x = evaluate_int(a, values), y = evaluate_int(b, values);
    if (!x || !y) return std::nullopt;
    return op(*x, *y);
  };
  auto floordiv = [](int64_t x, int64_t y) -> std::optional<int64_t> {
    if (y == 0) return std::nullopt;
    int64_t q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
  };
  switch (e.kind()) {
#define KILN_INT_BINARY(K, N, OP) \
  case ExprKind::K:               \
    return binary(e.as<N>()->a, e.as<N>()->b, [](int64_t x, int64_t y) -> std::optional<int64_t> { return OP; });
    KILN_INT_BINARY(kAdd, AddNode, x + y)
    KILN_INT_BINARY(kSub, SubNode, x - y)
    KILN_INT_BINARY(kMul, MulNode, x * y)
    KILN_INT_BINARY(kMin, MinNode, std::min(x, y))
    KILN_INT_BINARY(kMax, MaxNode, std::max(x, y))
    KILN_INT_BINARY(kLT, LTNode, x < y)
    KILN_INT_BINARY(kLE, LENode, x <= y)
    KILN_INT_BINARY(kGT, GTNode, x > y)
    KILN_INT_BINARY(kGE, GENode, x >= y)
    KILN_INT_BINARY(kEQ, EQNode, x == y)
    KILN_INT_BINARY(kNE, NENode, x != y)
    KILN_INT_BINARY(kAnd, AndNode, x && y)
    KILN_INT_BINARY(kOr, OrNode, x || y)
#undef KILN_INT_BINARY
    case ExprKind::kFloorDiv:
      return binary(e.as<FloorDivNode>()->a, e.as<FloorDivNode>()->b, floordiv);
    case ExprKind::kFloorMod:
      return binary(e.as<FloorModNode>()->a, e.as<FloorModNode>()->b,
                    [&](int64_t x, int64_t y) -> std::optional<int64_t> {
                      auto q = floordiv(x, y);
                      return q ? std::optional<int64_t>(x - *q * y) : std::nullopt;
                    });
    default:
      return std::nullopt;
  }
}

// Whether the writer `b` stores every element of `region` of `buffer`, and nothing
// outside it, during one iteration of `loop`, decided by running its loops below
// `loop`: for writers that dense_cover cannot read, such as a cooperative fetch whose
// loops were fused, split and bound to threads, with the partial last split's predicate.
bool enumerated_cover(const PrimFunc &f, const Buffer &buffer, const BlockNode *b, const ForNode *loop,
                      const sched::Region &region, const Analyzer &outer) {
  constexpr int64_t kMaxPoints = int64_t{1} << 20;
  std::vector<const ForNode *> inner;
  bool below = false;
  int64_t points = 1;
  for (const Stmt &s : sched::path_to(f.body, b)) {
    const auto *l = s.as<ForNode>();
    if (!l) continue;
    if (below) {
      inner.push_back(l);
      points *= l->extent;
      if (points > kMaxPoints) return false;
    }
    if (l == loop) below = true;
  }
  int64_t cells = 1;
  for (int64_t e : region.extent) {
    cells *= e;
    if (cells > kMaxPoints) return false;
  }
  VarMap bindings;
  for (size_t k = 0; k < b->iter_vars.size(); ++k) bindings[b->iter_vars[k].var.get()] = b->iter_values[k];
  Expr predicate = outer.simplify(substitute(b->predicate, bindings));
  std::vector<std::vector<Expr>> offsets;
  for (const sched::Access &a : sched::block_writes(b)) {
    if (a.buffer != buffer) continue;
    std::vector<Expr> offset;
    for (size_t d = 0; d < a.indices.size(); ++d)
      offset.push_back(outer.simplify(make_sub(substitute(a.indices[d], bindings), region.min[d])));
    offsets.push_back(std::move(offset));
  }
  std::vector<bool> written(static_cast<size_t>(cells), false);
  std::unordered_map<const VarNode *, int64_t> values;
  for (const ForNode *l : inner) values[l->loop_var.get()] = 0;
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (size_t i = inner.size(); i-- > 0;) {
      values[inner[i]->loop_var.get()] = rest % inner[i]->extent;
      rest /= inner[i]->extent;
    }
    std::optional<int64_t> runs = evaluate_int(predicate, values);
    if (!runs) return false;  // depends on something other than the loops below
    if (!*runs) continue;
    for (const std::vector<Expr> &offset : offsets) {
      int64_t cell = 0;
      bool inside = true;
      for (size_t d = 0; d < offset.size(); ++d) {
        std::optional<int64_t> o = evaluate_int(offset[d], values);
        if (!o) return false;
        inside = inside && *o >= 0 && *o < region.extent[d];
        cell = cell * region.extent[d] + *o;
      }
      if (!inside) return false;
      written[static_cast<size_t>(cell)] = true;
    }
  }
  return std::all_of(written.begin(), written.end(), [](bool w) { return w; });
}

// Whether writer `b` stores `region` of `buffer` in the form compute_at and cache nests
// produce: its index in each dimension is region start + one loop below `loop`
// covering the region, without predicates other than the buffer's own bounds.
bool writes_dense_tiles(const PrimFunc &f, const Buffer &buffer, const BlockNode *b, const ForNode *loop,
                        const sched::Region &region, const Analyzer &outer) {
  VarMap bindings;
  for (size_t k = 0; k < b->iter_vars.size(); ++k) bindings[b->iter_vars[k].var.get()] = b->iter_values[k];
  if (!predicate_only_bounds_writes(b, buffer, bindings)) return false;
  std::unordered_map<const VarNode *, int64_t> inner;  // loops below `loop` on b's path
  bool below = false;
  for (const Stmt &s : sched::path_to(f.body, b)) {
    const auto *l = s.as<ForNode>();
    if (!l) continue;
    if (below) inner[l->loop_var.get()] = l->extent;
    if (l == loop) below = true;
  }
  for (const sched::Access &a : sched::block_writes(b)) {
    if (a.buffer != buffer) continue;
    std::unordered_set<const VarNode *> used;
    for (size_t d = 0; d < a.indices.size(); ++d) {
      Expr offset = outer.simplify(make_sub(substitute(a.indices[d], bindings), region.min[d]));
      if (!dense_cover(offset, inner, region.extent[d], &used)) return false;
    }
  }
  return true;
}

// Compaction gives each iteration of `loop` a fresh buffer, which is only correct when
// every element read in an iteration was written earlier in that same iteration: every
// writer covers the region (writes_dense_tiles, or else enumerated_cover), and reads
// stay inside it.
bool self_contained(const PrimFunc &f, const Buffer &buffer, const std::vector<const BlockNode *> &blocks,
                    const ForNode *loop, const sched::Region &region) {
  Analyzer outer;
  for (const Stmt &s : sched::path_to(f.body, loop))
    if (const auto *l = s.as<ForNode>()) outer.bind(l->loop_var, l->extent);
  for (const BlockNode *b : blocks) {
    if (!sched::writes_buffer(b, buffer.get())) continue;
    if (!writes_dense_tiles(f, buffer, b, loop, region, outer) && !enumerated_cover(f, buffer, b, loop, region, outer))
      return false;
  }
  // Reads stay inside the region, which the writers cover.
  std::optional<sched::Region> read =
      sched::bounded_region_under_loop(f, buffer, blocks, loop, /*reads=*/true, /*writes=*/false);
  if (!read) return false;
  for (size_t d = 0; d < region.min.size(); ++d) {
    if (!outer.can_prove(make_cmp(ExprKind::kGE, read->min[d], region.min[d])) ||
        !outer.can_prove(make_cmp(ExprKind::kLE, make_add(read->min[d], make_int(read->extent[d])),
                                  make_add(region.min[d], make_int(region.extent[d])))))
      return false;
  }
  return true;
}

// Every writer among `blocks` fills `region` and writes nothing outside it
// (enumerated_cover).
bool filled_exactly(const PrimFunc &f, const Buffer &buffer, const std::vector<const BlockNode *> &blocks,
                    const ForNode *loop, const sched::Region &region) {
  Analyzer outer;
  for (const Stmt &s : sched::path_to(f.body, loop))
    if (const auto *l = s.as<ForNode>()) outer.bind(l->loop_var, l->extent);
  bool any = false;
  for (const BlockNode *b : blocks) {
    if (!sched::writes_buffer(b, buffer.get())) continue;
    if (!enumerated_cover(f, buffer, b, loop, region, outer)) return false;
    any = true;
  }
  return any;
}

}  // namespace

PrimFunc compact_buffers(const PrimFunc &f) {
  PrimFunc g = f;
  std::optional<BufferUsers> index;  // of g; made again after g changes
  for (const Buffer &buf : f.root()->alloc_buffers) {
    if (!index) index.emplace(g);
    auto found = index->users.find(buf.get());
    if (found == index->users.end()) continue;
    const std::vector<const BlockNode *> users = found->second;
    const ForNode *loop = common_loop(*index, users);
    if (!loop || reduction_spans_loop(g, buf, users, loop)) continue;
    std::optional<sched::Region> bounded =
        sched::bounded_region_under_loop(g, buf, users, loop, /*reads=*/true, /*writes=*/true);
    if (!bounded) continue;  // an access we cannot bound: keep the full buffer
    sched::Region region = *bounded;
    if (region.extent == buf->shape || !self_contained(g, buf, users, loop, region)) {
      // Writers whose predicate keeps them to less than their loops span (the partial
      // last split of a cooperative fetch): the region read, when running the writers
      // shows they fill exactly that.
      std::optional<sched::Region> read =
          sched::bounded_region_under_loop(g, buf, users, loop, /*reads=*/true, /*writes=*/false);
      if (!read || read->extent == buf->shape || !filled_exactly(g, buf, users, loop, *read)) continue;
      region = *read;
    }
    Buffer compact = make_buffer(buf->name, buf->dtype, region.extent, buf->scope);
    Stmt alloc = make_block(buf->name + "_alloc", {}, {}, Expr(), Stmt(),
                            rebase(buf, compact, region.min).mutate(loop->body), {compact});
    Stmt new_loop = with_body(loop, alloc);
    g = sched::remove_root_alloc(
        sched::with_body(g, sched::replace_stmt(g.body, sched::find_loop(g, loop->loop_var.get()).get(), new_loop)),
        buf);
    index.reset();
  }
  return sched::simplify_func(g);
}

namespace {

// For each buffer: the dimensions in which each read inside a vectorized loop varies
// with that loop's variable.
class VectorReads {
 public:
  std::unordered_map<const BufferNode *, std::vector<std::vector<size_t>>> varying;

  void walk(const Stmt &s, const VarNode *vec, const VarMap &bind) {
    if (const auto *l = s.as<ForNode>()) {
      walk(l->body, l->for_kind == ForKind::kVectorized ? l->loop_var.get() : vec, bind);
    } else if (const auto *b = s.as<BlockNode>()) {
      VarMap inner = bind;
      for (size_t k = 0; k < b->iter_vars.size(); ++k) inner[b->iter_vars[k].var.get()] = b->iter_values[k];
      if (b->init.defined()) walk(b->init, vec, inner);
      walk(b->body, vec, inner);
    } else if (const auto *q = s.as<SeqNode>()) {
      for (const Stmt &c : q->stmts) walk(c, vec, bind);
    } else if (const auto *i = s.as<IfThenElseNode>()) {
      scan(i->cond, vec, bind);
      walk(i->then_case, vec, bind);
      if (i->else_case.defined()) walk(i->else_case, vec, bind);
    } else if (const auto *st = s.as<StoreNode>()) {
      for (const Expr &e : st->indices) scan(e, vec, bind);
      scan(st->value, vec, bind);
    }
  }

 private:
  void scan(const Expr &e, const VarNode *vec, const VarMap &bind) {
    if (!vec) return;
    for_each_subexpr(e, [&](const Expr &x) {
      const auto *load = x.as<LoadNode>();
      if (!load) return;
      std::vector<size_t> dims;
      for (size_t d = 0; d < load->indices.size(); ++d)
        if (uses_var(substitute(load->indices[d], bind), vec)) dims.push_back(d);
      varying[load->buffer.get()].push_back(dims);
    });
  }
};

// A buffer with permuted dimensions (new dim i = old dim order[i]).
RemapBuffer permute(const Buffer &from, const Buffer &to, std::vector<size_t> order) {
  return RemapBuffer(from, to, [order = std::move(order)](const std::vector<Expr> &indices) {
    std::vector<Expr> out;
    for (size_t d : order) out.push_back(indices[d]);
    return out;
  });
}

}  // namespace

PrimFunc vector_friendly_layouts(const PrimFunc &f) {
  VectorReads reads;
  reads.walk(f.body, nullptr, {});
  std::vector<Buffer> allocated;
  for_each_stmt(f.body, [&](const Stmt &s) {
    if (const auto *b = s.as<BlockNode>())
      for (const Buffer &buf : b->alloc_buffers) allocated.push_back(buf);
  });
  PrimFunc g = f;
  for (const Buffer &buf : allocated) {
    auto it = reads.varying.find(buf.get());
    size_t rank = buf->shape.size();
    if (it == reads.varying.end() || rank < 2) continue;
    std::optional<size_t> dim;
    bool uniform = true;
    for (const std::vector<size_t> &dims : it->second) {
      if (dims.empty()) continue;  // invariant across lanes: a broadcast either way
      if (dims.size() != 1 || (dim && *dim != dims[0])) uniform = false;
      dim = dims[0];
    }
    if (!uniform || !dim || *dim == rank - 1) continue;
    std::vector<size_t> order;
    for (size_t d = 0; d < rank; ++d)
      if (d != *dim) order.push_back(d);
    order.push_back(*dim);
    std::vector<int64_t> shape;
    for (size_t d : order) shape.push_back(buf->shape[d]);
    g.body = permute(buf, make_buffer(buf->name, buf->dtype, shape, buf->scope), order).mutate(g.body);
  }
  return g;
}

namespace {

// See version_partial_tiles.
class PartialTileVersioner : public IRMutator {
 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    Stmt body = op->body;
    int added = 0;
    if (op->for_kind != ForKind::kVectorized) {
      for (const Version &v : versions_at(op)) {
        if (depth_ + added >= kMaxNestedVersions) break;
        bool guards_all = every_leaf_block_has(body, v.implied);
        Stmt full_tile = without_conjuncts(body, v.implied);
        if (v.any_valid.defined() && structural_equal(v.any_valid, v.full)) {
          // No loop inside moves the conjunct: the check only moves out of the loops.
          if (!guards_all) continue;
          body = make_if(v.full, full_tile);
        } else {
          body = make_if(v.full, full_tile, v.any_valid.defined() && guards_all ? make_if(v.any_valid, body) : body);
        }
        ++added;
      }
    }
    depth_ += added;
    outer_.push_back(op);
    body = mutate(body);
    outer_.pop_back();
    depth_ -= added;
    return body.same_as(op->body) ? self : with_body(op, body);
  }

 private:
  struct Version {
    Expr full;                  // every iteration inside satisfies the conjuncts
    Expr any_valid;             // some iteration inside does (undefined: unknown)
    std::vector<Expr> implied;  // the conjuncts `full` makes true
  };

  // Conjuncts `e < n` (or <=) of the blocks below that use the loop's variable, grouped
  // by their full-tile condition: an init's, its update's and its write-back's, over
  // different loops of one tile, share one version.
  std::vector<Version> versions_at(const ForNode *op) const {
    Analyzer analyzer;
    for (const ForNode *l : outer_) analyzer.bind(l->loop_var, l->extent);
    analyzer.bind(op->loop_var, op->extent);
    std::unordered_set<const VarNode *> inner;
    for_each_stmt(op->body, [&](const Stmt &s) {
      if (const auto *l = s.as<ForNode>()) {
        analyzer.bind(l->loop_var, l->extent);
        inner.insert(l->loop_var.get());
      }
    });
    std::vector<Version> out;
    for (const Expr &c : conjuncts_using(op->body, op->loop_var.get())) {
      Version v;
      v.full = bound_condition(analyzer, c, inner, /*most=*/true);
      if (!v.full.defined()) continue;
      auto same =
          std::find_if(out.begin(), out.end(), [&](const Version &o) { return structural_equal(o.full, v.full); });
      if (same != out.end()) {
        same->implied.push_back(c);
        continue;
      }
      v.any_valid = bound_condition(analyzer, c, inner, /*most=*/false);
      v.implied = {c};
      out.push_back(std::move(v));
    }
    return out;
  }

  static std::vector<Expr> conjuncts_using(const Stmt &body, const VarNode *loop_var) {
    std::vector<Expr> out;
    for_each_stmt(body, [&](const Stmt &s) {
      const auto *b = s.as<BlockNode>();
      if (!b) return;
      std::vector<Expr> terms;
      conjuncts(b->predicate, &terms);
      for (const Expr &t : terms) {
        if (!vars_of(t).count(loop_var)) continue;
        if (std::none_of(out.begin(), out.end(), [&](const Expr &o) { return structural_equal(o, t); }))
          out.push_back(t);
      }
    });
    return out;
  }

  // For `e < n` (or <=), over the loops outside the body: with most, that the largest e
  // the inner loops reach still satisfies it; else, that the smallest does. Undefined
  // where that cannot be written, or when it is constant (nothing to version).
  static Expr bound_condition(const Analyzer &analyzer, const Expr &c, const std::unordered_set<const VarNode *> &inner,
                              bool most) {
    Expr lhs, rhs;
    ExprKind kind;
    if (const auto *lt = c.as<LTNode>()) {
      lhs = lt->a, rhs = lt->b, kind = ExprKind::kLT;
    } else if (const auto *le = c.as<LENode>()) {
      lhs = le->a, rhs = le->b, kind = ExprKind::kLE;
    } else {
      return Expr();
    }
    for (const VarNode *v : vars_of(rhs))
      if (inner.count(v)) return Expr();
    Expr bound = most ? analyzer.symbolic_max(lhs, inner) : analyzer.symbolic_min(lhs, inner);
    if (!bound.defined()) return Expr();
    for (const VarNode *v : vars_of(bound))
      if (inner.count(v)) return Expr();
    Expr cond = analyzer.simplify(make_cmp(kind, bound, rhs));
    if (is_const_int(cond, 0) || is_const_int(cond, 1)) return Expr();
    return cond;
  }

  static bool has_any(const Expr &predicate, const std::vector<Expr> &wanted) {
    std::vector<Expr> terms;
    conjuncts(predicate, &terms);
    for (const Expr &t : terms)
      for (const Expr &w : wanted)
        if (structural_equal(t, w)) return true;
    return false;
  }

  // True when every block that stores (and holds no other block) is guarded by one of
  // `implied`, itself or through an enclosing block: then, when none of them holds,
  // the body does nothing.
  static bool every_leaf_block_has(const Stmt &body, const std::vector<Expr> &implied) {
    bool all = true;
    std::function<void(const Stmt &, bool)> walk = [&](const Stmt &s, bool guarded) {
      if (const auto *b = s.as<BlockNode>()) guarded = guarded || has_any(b->predicate, implied);
      std::vector<Stmt> children;
      if (const auto *b = s.as<BlockNode>()) {
        children.push_back(b->body);
      } else if (const auto *f = s.as<ForNode>()) {
        children.push_back(f->body);
      } else if (const auto *q = s.as<SeqNode>()) {
        children = q->stmts;
      } else if (const auto *i = s.as<IfThenElseNode>()) {
        children.push_back(i->then_case);
        if (i->else_case.defined()) children.push_back(i->else_case);
      } else if (s.as<StoreNode>()) {
        if (!guarded) all = false;
        return;
      }
      for (const Stmt &c : children) walk(c, guarded);
    };
    walk(body, false);
    return all;
  }

  static Stmt without_conjuncts(const Stmt &body, const std::vector<Expr> &drop) {
    struct Dropper : IRMutator {
      explicit Dropper(const std::vector<Expr> &drop) : drop(drop) {}
      const std::vector<Expr> &drop;
      Stmt visit(const BlockNode *op, const Stmt &self) override {
        Stmt inner = mutate(op->body);
        std::vector<Expr> terms;
        conjuncts(op->predicate, &terms);
        Expr pred = make_int(1, DType::kBool);
        bool dropped = false;
        for (const Expr &t : terms) {
          if (std::any_of(drop.begin(), drop.end(), [&](const Expr &c) { return structural_equal(t, c); })) {
            dropped = true;
            continue;
          }
          pred = is_const_int(pred, 1) ? t : make_and(pred, t);
        }
        if (!dropped && inner.same_as(op->body)) return self;
        return make_block(op->name, op->iter_vars, op->iter_values, dropped ? pred : op->predicate, op->init, inner,
                          op->alloc_buffers, op->annotations);
      }
    };
    return Dropper(drop).mutate(body);
  }

  // Each version doubles the code below it.
  static constexpr int kMaxNestedVersions = 4;
  std::vector<const ForNode *> outer_;
  int depth_ = 0;  // versions the enclosing loops added on this path
};

}  // namespace

PrimFunc version_partial_tiles(const PrimFunc &f) { return sched::with_body(f, PartialTileVersioner().mutate(f.body)); }

static LayoutRewrite lower_before_versioning(const PrimFunc &f) {
  return rewrite_constant_layouts(vector_friendly_layouts(compact_buffers(decompose_reductions(f))));
}

PrimFunc lower_for_analysis(const PrimFunc &f) { return lower_before_versioning(f).kernel; }

std::vector<PackedInput> packed_inputs(const PrimFunc &f) { return lower_before_versioning(f).packed; }

LayoutRewrite lower_with_prepack(const PrimFunc &f) {
  LayoutRewrite r = lower_before_versioning(f);
  r.kernel = version_partial_tiles(r.kernel);
  return r;
}

PrimFunc lower_for_codegen(const PrimFunc &f) { return lower_with_prepack(f).kernel; }

}  // namespace kiln::ir
