#include "ir/gpu_lower.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/lower_passes.h"
#include "ir/schedule/analysis.h"
#include "ir/structural.h"

namespace kiln::ir {
namespace {

constexpr const char *kAxes = "xyz";

enum class ThreadKind { kBlock, kThread, kVirtual };

struct BoundAxis {
  ThreadKind kind;
  int axis;  // 0, 1, 2 for x, y, z
};

BoundAxis parse_tag(const std::string &tag) {
  int axis = tag.back() - 'x';
  if (tag.rfind("blockIdx.", 0) == 0) return {ThreadKind::kBlock, axis};
  if (tag.rfind("threadIdx.", 0) == 0) return {ThreadKind::kThread, axis};
  return {ThreadKind::kVirtual, axis};
}

std::string describe(const ForNode *l) {
  std::string s = "loop '" + l->loop_var.name() + "' (extent " + std::to_string(l->extent);
  if (l->for_kind == ForKind::kThreadBinding) s += ", bound to " + l->thread_tag;
  return s + ")";
}

// The names of the blocks under a statement, for messages.
std::string block_names(const Stmt &s) {
  std::vector<std::string> names;
  for_each_stmt(s, [&](const Stmt &x) {
    const auto *b = x.as<BlockNode>();
    if (b && !b->iter_vars.empty() && names.size() < 4) names.push_back("'" + b->name + "'");
  });
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out.empty() ? "no block" : out;
}

// Launch extents and the checks that need the loops in place.
class LaunchShape : public IRVisitor {
 public:
  LaunchShape(const GpuLimits &limits, GpuKernel *kernel) : limits_(limits), kernel_(kernel) {}
  bool any_bound = false;

 protected:
  void visit(const ForNode *op, const Stmt &self) override {
    if (op->for_kind == ForKind::kParallel)
      throw GpuLoweringError(describe(op) +
                             " is parallel, a CPU schedule: bind it to blockIdx.* or threadIdx.* instead");
    if (op->for_kind == ForKind::kVectorized) check_vector(op);
    if (op->for_kind != ForKind::kThreadBinding) {
      enclosing_.push_back(op);
      IRVisitor::visit(op, self);
      enclosing_.pop_back();
      return;
    }
    any_bound = true;
    BoundAxis a = parse_tag(op->thread_tag);
    if (a.kind == ThreadKind::kBlock) {
      for (const ForNode *outer : enclosing_)
        if (outer->for_kind != ForKind::kThreadBinding || parse_tag(outer->thread_tag).kind != ThreadKind::kBlock ||
            outer->thread_tag == op->thread_tag)
          throw GpuLoweringError(describe(op) + " is inside " + describe(outer) +
                                 ": loops bound to blockIdx must be the outermost of their nest, one per axis "
                                 "(reorder them outside every other loop)");
      if (other_than_blocks_)
        throw GpuLoweringError(describe(op) +
                               " is not the outermost statement of its nest: loops bound to blockIdx "
                               "must enclose all of it");
      kernel_->grid[a.axis] = std::max(kernel_->grid[a.axis], op->extent);
    } else if (a.kind == ThreadKind::kThread) {
      kernel_->block[a.axis] = std::max(kernel_->block[a.axis], op->extent);
    } else {
      vthreads_ *= op->extent;
      if (vthreads_ > limits_.max_vthreads)
        throw GpuLoweringError(describe(op) + " makes " + std::to_string(vthreads_) +
                               " virtual threads around its body, more than the limit of " +
                               std::to_string(limits_.max_vthreads));
    }
    enclosing_.push_back(op);
    IRVisitor::visit(op, self);
    enclosing_.pop_back();
    if (a.kind == ThreadKind::kVirtual) vthreads_ /= op->extent;
  }
  void visit(const BlockNode *op, const Stmt &self) override {
    bool saved = other_than_blocks_;
    // An allocation block (no iterators) does not count as a statement around the loops.
    if (!op->iter_vars.empty()) other_than_blocks_ = true;
    IRVisitor::visit(op, self);
    other_than_blocks_ = saved;
  }
  void visit(const IfThenElseNode *op, const Stmt &self) override {
    bool saved = other_than_blocks_;
    other_than_blocks_ = true;
    IRVisitor::visit(op, self);
    other_than_blocks_ = saved;
  }

 private:
  void check_vector(const ForNode *op) {
    int64_t widest = 0;
    for_each_stmt(op->body, [&](const Stmt &s) {
      if (const auto *st = s.as<StoreNode>()) widest = std::max<int64_t>(widest, dtype_bytes(st->buffer->dtype));
    });
    for_each_expr(op->body, [&](const Expr &e) {
      if (const auto *ld = e.as<LoadNode>()) widest = std::max<int64_t>(widest, dtype_bytes(ld->buffer->dtype));
    });
    if (op->extent * widest > limits_.max_vector_bytes)
      throw GpuLoweringError(describe(op) + " is vectorized over " + std::to_string(op->extent * widest) +
                             " bytes per access; a GPU thread moves at most " +
                             std::to_string(limits_.max_vector_bytes) + " (split it to a narrower vector)");
  }

  const GpuLimits &limits_;
  GpuKernel *kernel_;
  std::vector<const ForNode *> enclosing_;
  bool other_than_blocks_ = false;
  int64_t vthreads_ = 1;
};

// Global-scope intermediates allocated under a threadIdx loop are the thread's own:
// they become local; those allocated outside the thread loops (a row's statistics
// computed at a blockIdx loop) are the block's: they become shared. A local buffer
// outside the thread loops is refused.
class ScopeAssigner : public IRMutator {
 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    bool thread = op->for_kind == ForKind::kThreadBinding && parse_tag(op->thread_tag).kind == ThreadKind::kThread;
    thread_depth_ += thread;
    Stmt out = IRMutator::visit(op, self);
    thread_depth_ -= thread;
    return out;
  }
  Stmt visit(const BlockNode *op, const Stmt &self) override {
    Stmt out = self;
    for (const Buffer &b : op->alloc_buffers) {
      if (b->scope == MemoryScope::kLocal && thread_depth_ == 0)
        throw GpuLoweringError("local buffer '" + b->name +
                               "' is allocated outside the loops bound to threadIdx, where each thread would hold "
                               "its own copy of what all threads access: compute it under the threadIdx loops, or "
                               "make it shared");
      if (b->scope != MemoryScope::kGlobal) continue;
      Buffer scoped =
          make_buffer(b->name, b->dtype, b->shape, thread_depth_ == 0 ? MemoryScope::kShared : MemoryScope::kLocal);
      out = RemapBuffer(b, scoped, [](std::vector<Expr> i) { return i; }).mutate(out);
    }
    const auto *b = out.as<BlockNode>();
    Stmt body = mutate(b->body);
    if (body.same_as(b->body)) return out;
    return make_block(b->name, b->iter_vars, b->iter_values, b->predicate, b->init, body, b->alloc_buffers,
                      b->annotations);
  }

 private:
  int thread_depth_ = 0;
};

// A reduction whose reduce iterator a threadIdx loop drives (softmax's row maximum with
// the row split over the threads): each thread accumulates its part into a local
// partial, ThreadAllReduce combines the partials of the threads along that axis, and
// thread 0 of each group stores the result. Read as loops, every thread would update
// the same element, a race on a GPU.
class CrossThreadReductions : public IRMutator {
 public:
  explicit CrossThreadReductions(const GpuKernel &k) : k_(k) {}

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    Stmt mutated = IRMutator::visit(op, self);
    const auto *l = mutated.as<ForNode>();
    if (l->for_kind != ForKind::kThreadBinding || parse_tag(l->thread_tag).kind != ThreadKind::kThread) return mutated;
    const BlockNode *reduce = nullptr;
    int found = 0;
    for_each_stmt(l->body, [&](const Stmt &s) {
      const auto *b = s.as<BlockNode>();
      if (!b) return;
      for (size_t k = 0; k < b->iter_vars.size(); ++k)
        if (b->iter_vars[k].kind == IterKind::kReduce && uses_var(b->iter_values[k], l->loop_var.get())) {
          if (reduce != b) ++found;
          reduce = b;
        }
    });
    if (!reduce) return mutated;
    std::string what = "the reduction of block '" + reduce->name + "' across " + describe(l);
    if (found > 1) throw GpuLoweringError(what + " has company: one reduction block per threadIdx loop");
    int axis = parse_tag(l->thread_tag).axis;
    if (axis != 0) throw GpuLoweringError(what + ": threads reduce across threadIdx.x only");
    if (l->extent != k_.block[0])
      throw GpuLoweringError(what + ": the block has " + std::to_string(k_.block[0]) +
                             " threads along x, and all of them must take part");
    bool power_of_two = (l->extent & (l->extent - 1)) == 0;
    if (!(power_of_two && l->extent <= 32) && l->extent % 32 != 0)
      throw GpuLoweringError(what + ": a group of threads must be a power of two up to a warp (32) or whole warps");
    if (l->extent > 32 * 32) throw GpuLoweringError(what + ": at most 1024 threads");
    if (k_.threads_per_block() > 32 && k_.threads_per_block() % 32 != 0)
      throw GpuLoweringError(what + ": the block's " + std::to_string(k_.threads_per_block()) +
                             " threads must fill whole warps");
    // Serial loops down to the block, nothing else.
    std::vector<const ForNode *> chain;
    Stmt at = l->body;
    while (const auto *f = at.as<ForNode>()) {
      if (f->for_kind == ForKind::kThreadBinding)
        throw GpuLoweringError(what + " has " + describe(f) + " inside: no thread loops below it");
      chain.push_back(f);
      at = f->body;
    }
    if (at.get() != reduce || reduce->init.defined())
      throw GpuLoweringError(what +
                             ": the block must be alone under the loop, inside serial loops only, and "
                             "its init outside (a reduction loop of its own)");
    const auto *store = reduce->body.as<StoreNode>();
    Combiner combiner;
    Expr contribution;
    if (!store || !update_of(store, &combiner, &contribution))
      throw GpuLoweringError(what + ": its body must be one update out = out + x (or max, min)");
    std::unordered_set<const VarNode *> inner = {l->loop_var.get()};
    for (const ForNode *f : chain) inner.insert(f->loop_var.get());
    auto uses_inner = [&](const Expr &e) {
      bool u = false;
      for_each_subexpr(e, [&](const Expr &x) {
        if (const auto *v = x.as<VarNode>()) u = u || inner.count(v) > 0;
      });
      return u;
    };

    const Buffer &out = store->buffer;
    Buffer partial = make_buffer(out->name + "_partial", out->dtype, {1}, MemoryScope::kLocal);
    Buffer scratch;
    std::vector<Buffer> allocs = {partial};
    if (l->extent > 32) {
      int64_t groups = k_.threads_per_block() / l->extent;
      scratch = make_buffer(out->name + "_warps", out->dtype, {groups * (l->extent / 32)}, MemoryScope::kShared);
      allocs.push_back(scratch);
    }
    Expr partial_value = make_load(partial, {make_int(0)});
    Stmt accumulate = make_block(reduce->name, reduce->iter_vars, reduce->iter_values, reduce->predicate, Stmt(),
                                 make_store(partial, {make_int(0)}, combine(combiner, partial_value, contribution)),
                                 reduce->alloc_buffers, reduce->annotations);
    for (size_t i = chain.size(); i-- > 0;) accumulate = with_body(chain[i], accumulate);
    // Thread 0 of the group stores the result, at the block's spatial iterators.
    std::vector<IterVar> iters;
    std::vector<Expr> values;
    VarMap fresh;
    for (size_t k = 0; k < reduce->iter_vars.size(); ++k) {
      const IterVar &iv = reduce->iter_vars[k];
      if (iv.kind != IterKind::kSpatial) continue;
      if (uses_inner(reduce->iter_values[k]))
        throw GpuLoweringError(what + ": its spatial iterator '" + iv.var.name() +
                               "' varies inside the reduction's loops");
      Var v(iv.var.name());
      fresh[iv.var.get()] = v;
      iters.push_back({v, iv.extent, IterKind::kSpatial});
      values.push_back(reduce->iter_values[k]);
    }
    std::vector<Expr> terms;
    conjuncts(reduce->predicate, &terms);
    Expr predicate = make_cmp(ExprKind::kEQ, l->loop_var, make_int(0));
    for (const Expr &t : terms)
      if (!uses_inner(t) && !uses_reduce_iterator(reduce, t)) predicate = make_and(predicate, t);
    std::vector<Expr> indices;
    for (const Expr &i : store->indices) indices.push_back(substitute(i, fresh));
    Stmt result = make_block(reduce->name + "_result", iters, values, predicate, Stmt(),
                             make_store(out, indices, combine(combiner, make_load(out, indices), partial_value)));
    Stmt body = make_seq({make_store(partial, {make_int(0)}, combiner_identity(combiner, out->dtype)), accumulate,
                          make_thread_allreduce(combiner, partial, scratch, axis, l->extent), result});
    return with_body(l, make_block(reduce->name + "_partial_alloc", {}, {}, Expr(), Stmt(), body, allocs));
  }

 private:
  // store: out[i] = out[i] (+|max|min) x, either operand order.
  static bool update_of(const StoreNode *store, Combiner *combiner, Expr *contribution) {
    const Expr &v = store->value;
    Expr a, b;
    if (const auto *n = v.as<AddNode>()) {
      *combiner = Combiner::kSum, a = n->a, b = n->b;
    } else if (const auto *n = v.as<MaxNode>()) {
      *combiner = Combiner::kMax, a = n->a, b = n->b;
    } else if (const auto *n = v.as<MinNode>()) {
      *combiner = Combiner::kMin, a = n->a, b = n->b;
    } else {
      return false;
    }
    auto is_self = [&](const Expr &e) {
      const auto *ld = e.as<LoadNode>();
      if (!ld || ld->buffer != store->buffer || ld->indices.size() != store->indices.size()) return false;
      for (size_t d = 0; d < ld->indices.size(); ++d)
        if (!structural_equal(ld->indices[d], store->indices[d])) return false;
      return true;
    };
    if (is_self(a) && !is_self(b)) {
      *contribution = b;
      return true;
    }
    if (is_self(b) && !is_self(a)) {
      *contribution = a;
      return true;
    }
    return false;
  }
  static bool uses_reduce_iterator(const BlockNode *b, const Expr &e) {
    for (const IterVar &iv : b->iter_vars)
      if (iv.kind == IterKind::kReduce && uses_var(e, iv.var.get())) return true;
    return false;
  }

  const GpuKernel &k_;
};

// Replaces bound loops by the kernel's indices (guarded where the launch is wider) and
// virtual-thread loops by unrolled ones.
class BindThreads : public IRMutator {
 public:
  explicit BindThreads(const GpuKernel &k) : k_(k) {}

 protected:
  Stmt visit(const ForNode *op, const Stmt &self) override {
    if (op->for_kind != ForKind::kThreadBinding) return IRMutator::visit(op, self);
    Stmt body = mutate(op->body);
    BoundAxis a = parse_tag(op->thread_tag);
    if (a.kind == ThreadKind::kVirtual) return make_for(op->loop_var, op->extent, ForKind::kUnrolled, body);
    const Var &index = a.kind == ThreadKind::kBlock ? k_.block_index[a.axis] : k_.thread_index[a.axis];
    int64_t launched = a.kind == ThreadKind::kBlock ? k_.grid[a.axis] : k_.block[a.axis];
    body = substitute(body, VarMap{{op->loop_var.get(), index}});
    if (op->extent < launched) body = make_if(make_cmp(ExprKind::kLT, index, make_int(op->extent)), body);
    return body;
  }

 private:
  const GpuKernel &k_;
};

// Shared buffers a statement reads and writes.
// Shared buffers a statement reads and writes, and whether it holds a cross-thread
// reduction (which every thread must reach, like a barrier).
struct SharedAccess {
  std::set<const BufferNode *> reads, writes;
  bool collective = false;
  bool empty() const { return reads.empty() && writes.empty() && !collective; }
  void add(const SharedAccess &o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
    collective = collective || o.collective;
  }
};

bool intersects(const std::set<const BufferNode *> &a, const std::set<const BufferNode *> &b) {
  return std::any_of(a.begin(), a.end(), [&](const BufferNode *x) { return b.count(x) > 0; });
}

// Whether `next` may touch what other threads did in `pending` without a barrier between:
// it reads what they wrote, or overwrites what they read. Writes after writes need no
// barrier: the stores of a schedule write each element once between reads.
bool conflicts(const SharedAccess &next, const SharedAccess &pending) {
  return intersects(next.reads, pending.writes) || intersects(next.writes, pending.reads);
}

// Inserts barriers at positions every thread reaches (outside conditions on thread
// indices): before a statement that conflicts with what ran since the last barrier,
// and at the end of a loop body whose next iteration would.
class SyncPlanner {
 public:
  explicit SyncPlanner(const GpuKernel &k) {
    for (const Var &v : k.thread_index) thread_vars_.insert(v.get());
  }

  Stmt plan(const Stmt &s, SharedAccess &pending) {
    SharedAccess acc = accesses(s);
    if (acc.empty()) return s;
    if (const auto *q = s.as<SeqNode>()) {
      std::vector<Stmt> out;
      for (const Stmt &c : q->stmts) out.push_back(plan(c, pending));
      return make_seq(std::move(out));
    }
    // Across several warps it synchronizes the block itself.
    if (const auto *r = s.as<ThreadAllReduceNode>()) {
      if (r->scratch) pending = SharedAccess();
      return s;
    }
    // A statement that conflicts with what ran before gets its barrier in front, not
    // deep inside its loops, where it would run once per iteration.
    if (!conflicts(acc, pending)) return plan_inside(s, pending);
    pending = SharedAccess();
    return make_seq({make_barrier(), plan_inside(s, pending)});
  }

 private:
  Stmt plan_inside(const Stmt &s, SharedAccess &pending) {
    SharedAccess acc = accesses(s);
    if (const auto *l = s.as<ForNode>()) {
      SharedAccess state = pending;
      Stmt body = plan(l->body, state);
      if (!state.empty() && conflicts(accesses(l->body), state)) {
        body = make_seq({body, make_barrier()});
        state = SharedAccess();
      }
      pending = state;
      return with_body(l, body);
    }
    if (const auto *i = s.as<IfThenElseNode>(); i && !thread_dependent(i->cond)) {
      SharedAccess other = pending;
      Stmt then_case = plan(i->then_case, pending);
      Stmt else_case = i->else_case.defined() ? plan(i->else_case, other) : Stmt();
      pending.add(other);
      return make_if(i->cond, then_case, else_case);
    }
    if (const auto *b = s.as<BlockNode>(); b && !thread_dependent(b->predicate) && !b->init.defined()) {
      Stmt body = plan(b->body, pending);
      return make_block(b->name, b->iter_vars, b->iter_values, b->predicate, b->init, body, b->alloc_buffers,
                        b->annotations);
    }
    // Runs as a whole in each thread, possibly only in some of them.
    check_no_internal_exchange(s);
    if (acc.collective)
      throw GpuLoweringError("a cross-thread reduction is inside code only some threads of a block run (" +
                             block_names(s) + "): all of them must take part");
    pending.add(acc);
    return s;
  }

  bool thread_dependent(const Expr &e) const {
    bool found = false;
    for_each_subexpr(e, [&](const Expr &x) {
      if (const auto *v = x.as<VarNode>()) found = found || thread_vars_.count(v) > 0;
    });
    return found;
  }

  SharedAccess accesses(const Stmt &s) {
    auto it = memo_.find(s.get());
    if (it != memo_.end()) return it->second;
    SharedAccess acc;
    for_each_stmt(s, [&](const Stmt &x) {
      if (const auto *st = x.as<StoreNode>(); st && st->buffer->scope == MemoryScope::kShared)
        acc.writes.insert(st->buffer.get());
      acc.collective = acc.collective || x.kind() == StmtKind::kThreadAllReduce;
    });
    for_each_expr(s, [&](const Expr &e) {
      if (const auto *ld = e.as<LoadNode>(); ld && ld->buffer->scope == MemoryScope::kShared)
        acc.reads.insert(ld->buffer.get());
    });
    memo_[s.get()] = acc;
    return acc;
  }

  // A statement that only some threads run cannot hold a barrier: refuse one in which a
  // store reads a shared buffer that another store before it wrote (other threads'
  // parts of it would not be there yet).
  void check_no_internal_exchange(const Stmt &s) {
    std::vector<Stmt> stores;
    for_each_stmt(s, [&](const Stmt &x) {
      if (x.as<StoreNode>()) stores.push_back(x);
    });
    std::set<const BufferNode *> written;
    for (const Stmt &store : stores) {
      const auto *st = store.as<StoreNode>();
      SharedAccess mine;
      for_each_expr(store, [&](const Expr &e) {
        if (const auto *ld = e.as<LoadNode>(); ld && ld->buffer->scope == MemoryScope::kShared)
          mine.reads.insert(ld->buffer.get());
      });
      for (const BufferNode *r : mine.reads)
        if (written.count(r) && r != st->buffer.get())
          throw GpuLoweringError("shared buffer '" + r->name +
                                 "' is written and then read inside code that only some threads of a block run (" +
                                 block_names(s) +
                                 "), where no barrier can go: make the extents of loops bound to the same threadIdx "
                                 "axis equal, or move the copy out of the guarded part");
      if (st->buffer->scope == MemoryScope::kShared) written.insert(st->buffer.get());
    }
  }

  std::unordered_set<const VarNode *> thread_vars_;
  std::unordered_map<const StmtNode *, SharedAccess> memo_;
};

void collect_buffers(const Stmt &body, GpuKernel *k) {
  // Local bytes: allocations on one path add up; siblings reuse the space.
  std::function<int64_t(const Stmt &)> local_bytes = [&](const Stmt &s) -> int64_t {
    if (const auto *b = s.as<BlockNode>()) {
      int64_t own = 0;
      for (const Buffer &buf : b->alloc_buffers) {
        int64_t bytes = dtype_bytes(buf->dtype);
        for (int64_t d : buf->shape) bytes *= d;
        if (buf->scope == MemoryScope::kShared) {
          if (std::find(k->shared.begin(), k->shared.end(), buf) == k->shared.end()) k->shared.push_back(buf);
        } else {
          own += bytes;
        }
      }
      return own + std::max(local_bytes(b->body), b->init.defined() ? local_bytes(b->init) : 0);
    }
    if (const auto *l = s.as<ForNode>()) return local_bytes(l->body);
    if (const auto *i = s.as<IfThenElseNode>())
      return std::max(local_bytes(i->then_case), i->else_case.defined() ? local_bytes(i->else_case) : 0);
    if (const auto *q = s.as<SeqNode>()) {
      int64_t most = 0;
      for (const Stmt &c : q->stmts) most = std::max(most, local_bytes(c));
      return most;
    }
    return 0;
  };
  k->local_bytes = local_bytes(body);
  std::vector<int64_t> offsets = shared_offsets(*k);
  k->shared_bytes = offsets.empty() ? 0 : offsets.back();
  if (!k->shared.empty()) {
    int64_t last = dtype_bytes(k->shared.back()->dtype);
    for (int64_t d : k->shared.back()->shape) last *= d;
    k->shared_bytes += last;
  }
}

void verify(const GpuKernel &k, const GpuLimits &limits, const Stmt &nest) {
  std::string where = " in the kernel of " + block_names(nest);
  for (int a = 0; a < 3; ++a) {
    if (k.block[a] > limits.max_block_dims[a])
      throw GpuLoweringError(std::to_string(k.block[a]) + " threads along threadIdx." + kAxes[a] + where +
                             ", more than the GPU's " + std::to_string(limits.max_block_dims[a]));
    if (k.grid[a] > limits.max_grid_dims[a])
      throw GpuLoweringError(std::to_string(k.grid[a]) + " blocks along blockIdx." + kAxes[a] + where +
                             ", more than the GPU's " + std::to_string(limits.max_grid_dims[a]));
  }
  if (k.threads_per_block() > limits.max_threads_per_block)
    throw GpuLoweringError(std::to_string(k.threads_per_block()) + " threads per block" + where + ", more than the " +
                           std::to_string(limits.max_threads_per_block) + " the GPU allows");
  if (k.shared_bytes > limits.max_shared_bytes_per_block)
    throw GpuLoweringError(std::to_string(k.shared_bytes) + " bytes of shared memory per block" + where +
                           ", more than the " + std::to_string(limits.max_shared_bytes_per_block) +
                           " the GPU allows (smaller shared tiles)");
  if (k.local_bytes > limits.max_local_bytes_per_thread)
    throw GpuLoweringError(std::to_string(k.local_bytes) + " bytes of local buffers per thread" + where +
                           ", more than " + std::to_string(limits.max_local_bytes_per_thread) +
                           " (they would spill out of registers: smaller thread tiles)");
}

GpuKernel make_kernel(const std::string &name, const Stmt &nest, const GpuLimits &limits) {
  GpuKernel k;
  k.name = name;
  for (int a = 0; a < 3; ++a) {
    k.block_index[a] = Var(std::string("blockIdx.") + kAxes[a]);
    k.thread_index[a] = Var(std::string("threadIdx.") + kAxes[a]);
  }
  LaunchShape shape(limits, &k);
  shape.visit_stmt(nest);
  if (!shape.any_bound)
    throw GpuLoweringError("the loop nest of " + block_names(nest) +
                           " would run on one GPU thread: bind its outer loops to blockIdx.* and threadIdx.*");
  Stmt body = CrossThreadReductions(k).mutate(nest);
  body = ScopeAssigner().mutate(body);
  body = BindThreads(k).mutate(body);
  SharedAccess pending;
  k.body = SyncPlanner(k).plan(body, pending);
  collect_buffers(k.body, &k);
  verify(k, limits, nest);
  return k;
}

}  // namespace

std::vector<int64_t> shared_offsets(const GpuKernel &kernel) {
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (const Buffer &b : kernel.shared) {
    offsets.push_back(at);
    int64_t bytes = dtype_bytes(b->dtype);
    for (int64_t d : b->shape) bytes *= d;
    at = (at + bytes + 15) / 16 * 16;
  }
  return offsets;
}

GpuProgram lower_for_gpu(const PrimFunc &func, const GpuLimits &limits) {
  PrimFunc g = sched::simplify_func(compact_buffers(decompose_reductions(func)));
  GpuProgram p;
  p.name = func.name;
  p.params = func.params;
  const BlockNode *root = g.root();
  for (const Buffer &b : root->alloc_buffers) {
    if (b->scope != MemoryScope::kGlobal)
      throw GpuLoweringError(std::string(scope_name(b->scope)) + " buffer '" + b->name +
                             "' is not under one kernel's loops: compute_at its producer into the loops of its "
                             "consumer (under the loops bound to blockIdx)");
    p.global_scratch.push_back(b);
  }
  std::vector<Stmt> nests;
  if (const auto *q = root->body.as<SeqNode>()) {
    nests = q->stmts;
  } else {
    nests.push_back(root->body);
  }
  for (size_t i = 0; i < nests.size(); ++i)
    p.kernels.push_back(make_kernel(func.name + "_kernel" + std::to_string(i), nests[i], limits));
  return p;
}

std::string to_string(const GpuProgram &program) {
  std::ostringstream os;
  for (const GpuKernel &k : program.kernels) {
    os << "kernel " << k.name << " grid(" << k.grid[0] << ", " << k.grid[1] << ", " << k.grid[2] << ") block("
       << k.block[0] << ", " << k.block[1] << ", " << k.block[2] << ") shared " << k.shared_bytes << " B, local "
       << k.local_bytes << " B\n";
    os << to_string(k.body);
  }
  return os.str();
}

}  // namespace kiln::ir
