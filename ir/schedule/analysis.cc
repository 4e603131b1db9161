#include "ir/schedule/analysis.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/structural.h"

namespace kiln::ir::sched {

std::vector<Stmt> path_to(const Stmt &root, const StmtNode *target) {
  std::vector<Stmt> path;
  std::function<bool(const Stmt &)> walk = [&](const Stmt &s) -> bool {
    if (!s.defined()) return false;
    path.push_back(s);
    if (s.get() == target) return true;
    bool found = false;
    if (const auto *f = s.as<ForNode>()) {
      found = walk(f->body);
    } else if (const auto *seq = s.as<SeqNode>()) {
      for (const Stmt &c : seq->stmts)
        if ((found = walk(c))) break;
    } else if (const auto *b = s.as<BlockNode>()) {
      found = walk(b->body);
    } else if (const auto *i = s.as<IfThenElseNode>()) {
      found = walk(i->then_case) || walk(i->else_case);
    }
    if (!found) path.pop_back();
    return found;
  };
  walk(root);
  return path;
}

Stmt find_block(const PrimFunc &f, const std::string &name, const std::string &primitive) {
  Stmt found;
  for_each_stmt(f.body, [&](const Stmt &s) {
    if (const auto *b = s.as<BlockNode>(); b && b->name == name && !s.same_as(f.body)) found = s;
  });
  if (!found.defined()) {
    std::string names;
    for (const BlockNode *b : all_blocks(f)) names += (names.empty() ? "" : ", ") + b->name;
    throw ScheduleError(primitive, "no block named '" + name + "'; blocks are: " + names);
  }
  return found;
}

Stmt find_loop(const PrimFunc &f, const VarNode *loop_var) {
  Stmt found;
  for_each_stmt(f.body, [&](const Stmt &s) {
    if (const auto *l = s.as<ForNode>(); l && l->loop_var.get() == loop_var) found = s;
  });
  return found;
}

std::vector<Stmt> loops_above(const PrimFunc &f, const StmtNode *block) {
  std::vector<Stmt> loops;
  for (const Stmt &s : path_to(f.body, block))
    if (s.as<ForNode>()) loops.push_back(s);
  return loops;
}

std::vector<const BlockNode *> blocks_under(const Stmt &s) {
  std::vector<const BlockNode *> blocks;
  for_each_stmt(s, [&](const Stmt &x) {
    if (const auto *b = x.as<BlockNode>(); b && !x.same_as(s)) blocks.push_back(b);
  });
  return blocks;
}

std::vector<const BlockNode *> all_blocks(const PrimFunc &f) { return blocks_under(f.body); }

int program_position(const PrimFunc &f, const BlockNode *block) {
  std::vector<const BlockNode *> blocks = all_blocks(f);
  for (size_t i = 0; i < blocks.size(); ++i)
    if (blocks[i] == block) return static_cast<int>(i);
  return -1;
}

namespace {
class Replacer : public IRMutator {
 public:
  Replacer(const StmtNode *target, Stmt replacement) : target_(target), replacement_(std::move(replacement)) {}
  Stmt run(const Stmt &s) { return s.get() == target_ ? replacement_ : mutate(s); }

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    if (op->body.get() == target_) {
      if (!replacement_.defined()) throw IRError("removing the only statement of loop '" + op->loop_var.name() + "'");
      return kiln::ir::with_body(op, replacement_);
    }
    return IRMutator::visit(op, self);
  }
  Stmt visit(const SeqNode *op, const Stmt &self) override {
    std::vector<Stmt> out;
    bool changed = false;
    for (const Stmt &s : op->stmts) {
      if (s.get() == target_) {
        changed = true;
        if (replacement_.defined()) out.push_back(replacement_);
        continue;
      }
      Stmt m = mutate(s);
      changed = changed || !m.same_as(s);
      out.push_back(m);
    }
    return changed ? make_seq(std::move(out)) : self;
  }
  Stmt visit(const BlockNode *op, const Stmt &self) override {
    if (op->body.get() == target_) {
      return make_block(op->name, op->iter_vars, op->iter_values, op->predicate, op->init,
                        replacement_.defined() ? replacement_ : make_seq({}), op->alloc_buffers, op->annotations);
    }
    return IRMutator::visit(op, self);
  }
  // A store holds no statement to replace: its expressions are not walked.
  Stmt visit(const StoreNode *, const Stmt &self) override { return self; }

 private:
  const StmtNode *target_;
  Stmt replacement_;
};
}  // namespace

Stmt replace_stmt(const Stmt &root, const StmtNode *target, const Stmt &replacement) {
  return Replacer(target, replacement).run(root);
}

PrimFunc with_body(const PrimFunc &f, Stmt body) {
  PrimFunc g = f;
  g.body = std::move(body);
  return g;
}

static PrimFunc with_root_allocs(const PrimFunc &f, std::vector<Buffer> allocs) {
  const BlockNode *r = f.root();
  return with_body(f, make_block(r->name, r->iter_vars, r->iter_values, r->predicate, r->init, r->body,
                                 std::move(allocs), r->annotations));
}

PrimFunc add_root_alloc(const PrimFunc &f, const Buffer &b) {
  std::vector<Buffer> allocs = f.root()->alloc_buffers;
  allocs.push_back(b);
  return with_root_allocs(f, std::move(allocs));
}

PrimFunc remove_root_alloc(const PrimFunc &f, const Buffer &b) {
  std::vector<Buffer> allocs;
  for (const Buffer &x : f.root()->alloc_buffers)
    if (x != b) allocs.push_back(x);
  return with_root_allocs(f, std::move(allocs));
}

Stmt exclusive_subtree(const PrimFunc &f, const StmtNode *block) {
  std::vector<Stmt> path = path_to(f.body, block);
  // path: root block, ..., block. Climb while the parent is a loop whose body is the child.
  size_t i = path.size() - 1;
  while (i >= 2) {
    const auto *parent = path[i - 1].as<ForNode>();
    if (!parent || parent->body.get() != path[i].get()) break;
    --i;
  }
  return path[i];
}

Stmt root_level_stmt(const PrimFunc &f, const StmtNode *node) {
  std::vector<Stmt> path = path_to(f.body, node);
  // path[0] is the root block; path[1] is its body (a Seq or the only nest).
  if (path.size() < 2) return Stmt();
  if (path[1].as<SeqNode>()) return path.size() > 2 ? path[2] : Stmt();
  return path[1];
}

namespace {
class AccessCollector : public IRVisitor {
 public:
  std::vector<Access> reads, writes;

 protected:
  void visit(const LoadNode *op, const Expr &self) override {
    reads.push_back(Access{op->buffer, op->indices});
    IRVisitor::visit(op, self);
  }
  void visit(const StoreNode *op, const Stmt &self) override {
    writes.push_back(Access{op->buffer, op->indices});
    IRVisitor::visit(op, self);
  }
  // A nested block's accesses belong to that block (collection starts at the block's
  // own init and body, so every block met here is nested).
  void visit(const BlockNode *, const Stmt &) override {}
};

AccessCollector collect(const BlockNode *block) {
  AccessCollector c;
  if (block->init.defined()) c.visit_stmt(block->init);
  c.visit_stmt(block->body);
  return c;
}

// The stores of a block alone: they are statements, so no expression is walked (a
// block with a chain of element-wise producers inlined holds one deep expression).
class WriteCollector : public AccessCollector {
 protected:
#define KILN_SKIP(N) \
  void visit(const N##Node *, const Expr &) override {}
  KILN_EXPR_NODES(KILN_SKIP)
#undef KILN_SKIP
};

// Whether a block loads a buffer, without collecting its accesses.
class LoadFinder : public IRVisitor {
 public:
  explicit LoadFinder(const BufferNode *buffer) : buffer_(buffer) {}
  bool found = false;

 protected:
  void visit(const LoadNode *op, const Expr &self) override {
    if (op->buffer.get() == buffer_) found = true;
    if (!found) IRVisitor::visit(op, self);
  }
  void visit(const BlockNode *, const Stmt &) override {}

 private:
  const BufferNode *buffer_;
};

template <typename Visitor>
Visitor &visit_block(const BlockNode *block, Visitor &&v) {
  if (block->init.defined()) v.visit_stmt(block->init);
  v.visit_stmt(block->body);
  return v;
}
}  // namespace

std::vector<Access> block_reads(const BlockNode *block) { return collect(block).reads; }
std::vector<Access> block_writes(const BlockNode *block) {
  WriteCollector c;
  return visit_block(block, c).writes;
}

std::vector<Buffer> distinct_buffers(const std::vector<Access> &accesses) {
  std::vector<Buffer> out;
  for (const Access &a : accesses) {
    bool seen = false;
    for (const Buffer &b : out) seen = seen || b == a.buffer;
    if (!seen) out.push_back(a.buffer);
  }
  return out;
}

bool reads_buffer(const BlockNode *block, const BufferNode *b) {
  LoadFinder finder(b);
  return visit_block(block, finder).found;
}

bool writes_buffer(const BlockNode *block, const BufferNode *b) {
  for (const Access &a : block_writes(block))
    if (a.buffer.get() == b) return true;
  return false;
}

bool is_param(const PrimFunc &f, const BufferNode *b) {
  for (const Buffer &p : f.params)
    if (p.get() == b) return true;
  return false;
}

std::optional<Region> bounded_region_under_loop(const PrimFunc &f, const Buffer &buffer,
                                                const std::vector<const BlockNode *> &blocks, const ForNode *loop,
                                                bool reads, bool writes) {
  try {
    return region_under_loop(f, buffer, blocks, loop, reads, writes, "region");
  } catch (const ScheduleError &) {
    return std::nullopt;
  }
}

namespace {
// The accesses of `accesses` to `buffer`, each index tuple once. Table-driven operators
// (the Winograd transforms) repeat the same few loads hundreds of times in one
// expression; bounding each repeat again made placing their producers the search's
// slowest step.
std::vector<Access> distinct_accesses_of(const std::vector<Access> &accesses, const Buffer &buffer) {
  std::vector<Access> out;
  std::unordered_map<uint64_t, std::vector<size_t>> by_hash;
  for (const Access &a : accesses) {
    if (a.buffer != buffer) continue;
    uint64_t h = 0;
    for (const Expr &i : a.indices) h = h * 1000003u + structural_hash(i);
    std::vector<size_t> &bucket = by_hash[h];
    bool seen = false;
    for (size_t k : bucket) {
      seen = std::equal(a.indices.begin(), a.indices.end(), out[k].indices.begin(), out[k].indices.end(),
                        [](const Expr &x, const Expr &y) { return same_expr(x, y); });
      if (seen) break;
    }
    if (seen) continue;
    bucket.push_back(out.size());
    out.push_back(a);
  }
  return out;
}
}  // namespace

bool is_thread_loop(const ForNode *loop) {
  return loop->for_kind == ForKind::kThreadBinding && loop->thread_tag.rfind("blockIdx", 0) != 0;
}

Region region_under_loop(const PrimFunc &f, const Buffer &buffer, const std::vector<const BlockNode *> &blocks,
                         const ForNode *loop, bool reads, bool writes, const std::string &primitive) {
  Analyzer outer;
  for (const Stmt &s : path_to(f.body, loop)) {
    if (const auto *l = s.as<ForNode>()) outer.bind(l->loop_var, l->extent);
  }
  size_t ndim = buffer->shape.size();
  std::vector<Expr> lo(ndim), hi(ndim);
  for (const BlockNode *b : blocks) {
    // Bind every loop above the block; those below `loop` are relaxed, and for a
    // shared buffer also the thread loops above it: the threads of a block share one
    // copy, so it holds what all of them access.
    Analyzer analyzer;
    std::unordered_set<const VarNode *> relaxed;
    bool below = false;
    for (const Stmt &s : path_to(f.body, b)) {
      const auto *l = s.as<ForNode>();
      if (!l) continue;
      analyzer.bind(l->loop_var, l->extent);
      if (below || (buffer->scope == MemoryScope::kShared && is_thread_loop(l))) relaxed.insert(l->loop_var.get());
      if (l == loop) below = true;
    }
    VarMap bindings;
    for (size_t k = 0; k < b->iter_vars.size(); ++k) bindings[b->iter_vars[k].var.get()] = b->iter_values[k];
    std::vector<Access> accesses;
    if (reads) accesses = block_reads(b);
    if (writes) {
      std::vector<Access> w = block_writes(b);
      accesses.insert(accesses.end(), w.begin(), w.end());
    }
    for (const Access &a : distinct_accesses_of(accesses, buffer)) {
      for (size_t d = 0; d < ndim; ++d) {
        Expr idx = substitute(a.indices[d], bindings);
        Expr mn, mx;
        try {
          mn = analyzer.symbolic_min(idx, relaxed);
          mx = analyzer.symbolic_max(idx, relaxed);
        } catch (const IRError &e) {
          throw ScheduleError(primitive, "cannot bound the region of '" + buffer->name + "' accessed by block '" +
                                             b->name + "': " + e.what());
        }
        lo[d] = lo[d].defined() ? outer.simplify(make_min(lo[d], mn)) : mn;
        hi[d] = hi[d].defined() ? outer.simplify(make_max(hi[d], mx)) : mx;
      }
    }
  }
  Region region;
  for (size_t d = 0; d < ndim; ++d) {
    if (!lo[d].defined()) throw ScheduleError(primitive, "no access to '" + buffer->name + "' under the loop");
    Expr extent = outer.simplify(make_add(make_sub(hi[d], lo[d]), make_int(1)));
    int64_t e = 0;
    if (!as_const_int(extent, &e)) {
      Interval r = outer.bounds(extent);
      if (r.max >= Interval::kInf)
        throw ScheduleError(primitive, "cannot bound the region " + to_string(lo[d]) + " .. " + to_string(hi[d]) +
                                           " of '" + buffer->name + "'");
      e = r.max;
    }
    if (e >= buffer->shape[d]) {
      region.min.push_back(make_int(0));
      region.extent.push_back(buffer->shape[d]);
    } else {
      region.min.push_back(lo[d]);
      region.extent.push_back(std::max<int64_t>(e, 1));
    }
  }
  return region;
}

namespace {
class FuncSimplifier : public IRMutator {
 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    analyzer_.bind(op->loop_var, op->extent);
    Stmt r = IRMutator::visit(op, self);
    analyzer_.unbind(op->loop_var);
    return r;
  }
  Stmt visit(const BlockNode *op, const Stmt &self) override {
    std::vector<Expr> values;
    bool changed = false;
    for (const Expr &v : op->iter_values) {
      values.push_back(analyzer_.simplify(v));
      changed = changed || !values.back().same_as(v);
    }
    Expr pred = analyzer_.simplify(op->predicate);
    for (const IterVar &iv : op->iter_vars) analyzer_.bind(iv.var, iv.extent, /*fold_single_value=*/false);
    Stmt init = mutate(op->init), body = mutate(op->body);
    for (const IterVar &iv : op->iter_vars) analyzer_.unbind(iv.var);
    if (!changed && pred.same_as(op->predicate) && init.same_as(op->init) && body.same_as(op->body)) return self;
    return make_block(op->name, op->iter_vars, std::move(values), std::move(pred), std::move(init), std::move(body),
                      op->alloc_buffers, op->annotations);
  }
  Stmt visit(const StoreNode *op, const Stmt &self) override {
    std::vector<Expr> idx;
    bool changed = false;
    for (const Expr &i : op->indices) {
      idx.push_back(analyzer_.simplify(i));
      changed = changed || !idx.back().same_as(i);
    }
    Expr value = analyzer_.simplify(op->value);
    if (!changed && value.same_as(op->value)) return self;
    return make_store(op->buffer, std::move(idx), std::move(value));
  }
  Stmt visit(const IfThenElseNode *op, const Stmt &) override {
    return make_if(analyzer_.simplify(op->cond), mutate(op->then_case), mutate(op->else_case));
  }

 private:
  Analyzer analyzer_;
};
}  // namespace

PrimFunc simplify_func(const PrimFunc &f) {
  FuncSimplifier s;
  return with_body(f, s.mutate(f.body));
}

PrimFunc rewrite_root_level(const PrimFunc &f, const std::function<Stmt(const Stmt &)> &rewrite) {
  const BlockNode *r = f.root();
  auto one = [&](const Stmt &s) {
    Stmt m = rewrite(s);
    if (m.same_as(s) || !m.defined()) return m;
    FuncSimplifier simplifier;
    return simplifier.mutate(m);
  };
  Stmt body;
  if (const auto *seq = r->body.as<SeqNode>()) {
    std::vector<Stmt> stmts;
    bool changed = false;
    for (const Stmt &s : seq->stmts) {
      Stmt m = one(s);
      changed = changed || !m.same_as(s);
      if (m.defined()) stmts.push_back(std::move(m));
    }
    if (!changed) return f;
    body = make_seq(std::move(stmts));
  } else {
    body = one(r->body);
    if (body.same_as(r->body)) return f;
  }
  return with_body(f, make_block(r->name, r->iter_vars, r->iter_values, r->predicate, r->init, std::move(body),
                                 r->alloc_buffers, r->annotations));
}

std::string fresh_block_name(const PrimFunc &f, const std::string &base) {
  std::unordered_set<std::string> names{"root"};
  for (const BlockNode *b : all_blocks(f)) names.insert(b->name);
  std::string name = base;
  for (int i = 1; names.count(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

std::string fresh_buffer_name(const PrimFunc &f, const std::string &base) {
  std::unordered_set<std::string> names;
  for (const Buffer &b : f.params) names.insert(b->name);
  for (const Buffer &b : f.root()->alloc_buffers) names.insert(b->name);
  std::string name = base;
  for (int i = 1; names.count(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

}  // namespace kiln::ir::sched
