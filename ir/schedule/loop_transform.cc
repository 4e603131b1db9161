// split, fuse, reorder, loop kinds and annotations.
#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/schedule/primitives.h"

namespace kiln::ir::sched {

std::string describe_loop(const ForNode *loop) {
  return "loop '" + loop->loop_var.name() + "' (extent " + std::to_string(loop->extent) + ")";
}

static const ForNode *require_loop(const PrimFunc &f, const Var &loop, const std::string &primitive, Stmt *stmt) {
  *stmt = find_loop(f, loop.get());
  if (!stmt->defined())
    throw ScheduleError(primitive, "loop '" + loop.name() + "' no longer exists (it was split, fused or moved)");
  return stmt->as<ForNode>();
}

namespace {
// Substitutes a loop variable and conjoins a predicate on every block below.
class LoopRewriter : public IRMutator {
 public:
  LoopRewriter(const VarMap &map, Expr extra_predicate) : map_(map), extra_(std::move(extra_predicate)) {}

 protected:
  Expr visit(const VarNode *op, const Expr &self) override {
    auto it = map_.find(op);
    return it == map_.end() ? self : it->second;
  }
  Stmt visit(const BlockNode *op, const Stmt &) override {
    std::vector<Expr> values;
    for (const Expr &v : op->iter_values) values.push_back(mutate(v));
    Expr pred = mutate(op->predicate);
    if (extra_.defined()) pred = make_and(pred, extra_);
    // Iterators are block-local: the body needs no substitution.
    return make_block(op->name, op->iter_vars, std::move(values), std::move(pred), op->init, op->body,
                      op->alloc_buffers, op->annotations);
  }

 private:
  const VarMap &map_;
  Expr extra_;
};
}  // namespace

PrimFunc split(const PrimFunc &f, const Var &loop, std::vector<int64_t> factors, std::vector<Var> *new_loops) {
  Stmt stmt;
  const ForNode *l = require_loop(f, loop, "split", &stmt);
  if (factors.size() < 2) throw ScheduleError("split", "needs at least two factors for " + describe_loop(l));
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < factors.size(); ++i) {
    if (factors[i] == -1) {
      if (inferred >= 0)
        throw ScheduleError("split", "at most one factor may be inferred (-1) for " + describe_loop(l));
      inferred = static_cast<int>(i);
    } else if (factors[i] <= 0) {
      throw ScheduleError("split",
                          "factor " + std::to_string(factors[i]) + " of " + describe_loop(l) + " is not positive");
    } else if (__builtin_mul_overflow(known, factors[i], &known)) {
      throw ScheduleError("split", "the factors of " + describe_loop(l) + " multiply past 2^63; each may be at most " +
                                       "the loop's extent");
    }
  }
  if (inferred >= 0) factors[inferred] = (l->extent + known - 1) / known;
  int64_t product = 1;
  for (int64_t x : factors) {
    // Checked: a wrapped product could pass the comparison below and index out of bounds.
    if (__builtin_mul_overflow(product, x, &product)) {
      throw ScheduleError("split", "the factors of " + describe_loop(l) + " multiply past 2^63");
    }
  }
  if (product < l->extent) {
    std::ostringstream os;
    os << "factors [";
    for (size_t i = 0; i < factors.size(); ++i) os << (i ? ", " : "") << factors[i];
    os << "] multiply to " << product << ", less than the extent of " << describe_loop(l);
    throw ScheduleError("split", os.str());
  }
  std::vector<Var> vars;
  Expr fused;
  for (size_t i = 0; i < factors.size(); ++i) {
    vars.emplace_back(l->loop_var.name() + "_" + std::to_string(i));
    fused = i == 0 ? Expr(vars[0]) : make_add(make_mul(fused, make_int(factors[i])), vars[i]);
  }
  VarMap map{{l->loop_var.get(), fused}};
  Expr pred = product == l->extent ? Expr() : make_cmp(ExprKind::kLT, fused, make_int(l->extent));
  LoopRewriter rewriter(map, pred);
  Stmt body = rewriter.mutate(l->body);
  for (size_t i = factors.size(); i-- > 0;) {
    bool innermost = i + 1 == factors.size();
    body = make_for(vars[i], factors[i], innermost ? l->for_kind : ForKind::kSerial, body,
                    innermost ? l->thread_tag : "", innermost ? l->annotations : Annotations{});
  }
  *new_loops = vars;
  return simplify_func(with_body(f, replace_stmt(f.body, stmt.get(), body)));
}

PrimFunc fuse(const PrimFunc &f, const std::vector<Var> &loops, Var *fused) {
  if (loops.empty()) throw ScheduleError("fuse", "needs at least one loop");
  std::vector<const ForNode *> nodes;
  Stmt outer;
  for (size_t i = 0; i < loops.size(); ++i) {
    Stmt s;
    nodes.push_back(require_loop(f, loops[i], "fuse", &s));
    if (i == 0) outer = s;
    if (i > 0 && nodes[i - 1]->body.get() != s.get())
      throw ScheduleError("fuse", "loops '" + loops[i - 1].name() + "' and '" + loops[i].name() +
                                      "' are not directly nested (the second must be the only statement in the "
                                      "first's body)");
  }
  std::string name;
  int64_t extent = 1;
  for (const ForNode *n : nodes) {
    name += n->loop_var.name() + "_";
    extent *= n->extent;
  }
  Var v(name + "fused");
  VarMap map;
  int64_t inner = extent;
  for (size_t i = 0; i < nodes.size(); ++i) {
    inner /= nodes[i]->extent;
    Expr e = inner == 1 ? Expr(v) : make_floordiv(v, make_int(inner));
    if (i > 0) e = make_floormod(e, make_int(nodes[i]->extent));
    map[nodes[i]->loop_var.get()] = e;
  }
  LoopRewriter rewriter(map, Expr());
  Stmt body = rewriter.mutate(nodes.back()->body);
  *fused = v;
  return simplify_func(with_body(f, replace_stmt(f.body, outer.get(), make_for(v, extent, ForKind::kSerial, body))));
}

PrimFunc reorder(const PrimFunc &f, const std::vector<Var> &order) {
  if (order.empty()) return f;
  std::unordered_set<const VarNode *> wanted;
  std::vector<Stmt> stmts;
  for (const Var &v : order) {
    Stmt s;
    require_loop(f, v, "reorder", &s);
    if (!wanted.insert(v.get()).second) throw ScheduleError("reorder", "loop '" + v.name() + "' is listed twice");
    stmts.push_back(s);
  }
  // The deepest listed loop's ancestors must include every other listed loop.
  std::vector<Stmt> deepest_path;
  for (const Stmt &s : stmts) {
    std::vector<Stmt> p = path_to(f.body, s.get());
    if (p.size() > deepest_path.size()) deepest_path = p;
  }
  size_t first = deepest_path.size(), last = 0, found = 0;
  for (size_t i = 0; i < deepest_path.size(); ++i) {
    const auto *l = deepest_path[i].as<ForNode>();
    if (l && wanted.count(l->loop_var.get())) {
      first = std::min(first, i);
      last = i;
      ++found;
    }
  }
  auto listed = [&] {
    std::string names;
    for (const Var &v : order) names += (names.empty() ? "'" : ", '") + v.name() + "'";
    return names;
  };
  if (found != order.size())
    throw ScheduleError("reorder",
                        "loops " + listed() + " are not nested in one another (they belong to different loop nests)");
  std::vector<const ForNode *> chain;
  for (size_t i = first; i <= last; ++i) {
    const auto *l = deepest_path[i].as<ForNode>();
    if (!l) {
      // The path starts at a listed loop, so a loop holds this block or sequence.
      const ForNode *holder = deepest_path[i - 1].as<ForNode>();
      throw ScheduleError("reorder", (holder ? describe_loop(holder) : std::string("a loop")) + " holds " +
                                         (deepest_path[i].as<BlockNode>() ? "a block" : "other statements") +
                                         " besides the next loop, so loops " + listed() +
                                         " cannot be exchanged across it");
    }
    chain.push_back(l);
  }
  // A loop driving both spatial and reduction iterators (from fusing the two kinds) fixes
  // the order in which each output element is first visited; moving it (or the loops
  // split from it) could run updates before the reduction's init.
  for (const Var &v : order) {
    for (const BlockNode *b : blocks_under(find_loop(f, v.get()))) {
      bool spatial = false, reduce = false;
      for (size_t k = 0; k < b->iter_vars.size(); ++k) {
        if (!uses_var(b->iter_values[k], v.get())) continue;
        (b->iter_vars[k].kind == IterKind::kReduce ? reduce : spatial) = true;
      }
      if (spatial && reduce)
        throw ScheduleError("reorder", "loop '" + v.name() +
                                           "' drives both spatial and reduction iterators of block '" + b->name +
                                           "'; such a loop cannot be reordered");
    }
  }
  std::vector<const ForNode *> new_chain = chain;
  size_t next = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (!wanted.count(chain[i]->loop_var.get())) continue;
    new_chain[i] = find_loop(f, order[next++].get()).as<ForNode>();
  }
  Stmt body = chain.back()->body;
  for (size_t i = new_chain.size(); i-- > 0;) body = kiln::ir::with_body(new_chain[i], body);
  return with_body(f, replace_stmt(f.body, deepest_path[first].get(), body));
}

static const std::unordered_set<std::string> kThreadTags = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                                            "threadIdx.x", "threadIdx.y", "threadIdx.z",
                                                            "vthread.x",   "vthread.y",   "vthread.z"};

PrimFunc set_loop_kind(const PrimFunc &f, const Var &loop, ForKind kind, const std::string &thread_tag,
                       const std::string &primitive) {
  Stmt stmt;
  const ForNode *l = require_loop(f, loop, primitive, &stmt);
  if (kind == ForKind::kThreadBinding && !kThreadTags.count(thread_tag))
    throw ScheduleError(primitive, "cannot bind " + describe_loop(l) + " to unknown thread '" + thread_tag +
                                       "'; expected blockIdx.{x,y,z}, threadIdx.{x,y,z} or vthread.{x,y,z}");
  // A reduction loop bound to threads becomes a cross-thread reduction on the GPU
  // (ir/gpu_lower.h); bound to blocks or virtual threads, or run in parallel or as
  // vector lanes, its iterations would race.
  bool cross_thread = kind == ForKind::kThreadBinding && thread_tag.rfind("threadIdx.", 0) == 0;
  if ((kind == ForKind::kParallel || kind == ForKind::kVectorized || kind == ForKind::kThreadBinding) &&
      !cross_thread) {
    // Iterations must be independent: the loop may not drive a reduction iterator.
    for (const BlockNode *b : blocks_under(stmt)) {
      for (size_t i = 0; i < b->iter_vars.size(); ++i) {
        if (b->iter_vars[i].kind == IterKind::kReduce && uses_var(b->iter_values[i], l->loop_var.get()))
          throw ScheduleError(primitive, describe_loop(l) + " drives reduction iterator '" +
                                             b->iter_vars[i].var.name() + "' of block '" + b->name +
                                             "'; its iterations would race on the same output elements");
      }
    }
  }
  return with_body(f, replace_stmt(f.body, stmt.get(), with_for_kind(l, kind, thread_tag)));
}

PrimFunc annotate_loop(const PrimFunc &f, const Var &loop, const std::string &key, int64_t value) {
  Stmt stmt;
  const ForNode *l = require_loop(f, loop, "annotate", &stmt);
  Annotations ann = l->annotations;
  ann[key] = value;
  return with_body(
      f, replace_stmt(f.body, stmt.get(), make_for(l->loop_var, l->extent, l->for_kind, l->body, l->thread_tag, ann)));
}

PrimFunc annotate_block(const PrimFunc &f, const std::string &block, const std::string &key, int64_t value) {
  Stmt stmt = find_block(f, block, "annotate");
  const auto *b = stmt.as<BlockNode>();
  Annotations ann = b->annotations;
  ann[key] = value;
  return with_body(f, replace_stmt(f.body, stmt.get(),
                                   make_block(b->name, b->iter_vars, b->iter_values, b->predicate, b->init, b->body,
                                              b->alloc_buffers, ann)));
}

MemoryScope parse_scope(const std::string &primitive, const std::string &scope) {
  if (scope == "global") return MemoryScope::kGlobal;
  if (scope == "shared") return MemoryScope::kShared;
  if (scope == "local") return MemoryScope::kLocal;
  throw ScheduleError(primitive, "unknown storage scope '" + scope + "'; expected global, shared or local");
}

}  // namespace kiln::ir::sched
