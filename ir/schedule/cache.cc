// cache_read and cache_write: stage a buffer through a copy in another storage scope.
#include "ir/functor.h"
#include "ir/schedule/primitives.h"

namespace kiln::ir::sched {
namespace {

// The copy block dst[v...] = src[v...] over the whole buffer, in its own loop nest.
Stmt copy_nest(const std::string &name, const Buffer &src, const Buffer &dst) {
  std::vector<IterVar> iters;
  std::vector<Expr> values, idx;
  std::vector<Var> loops;
  for (size_t d = 0; d < src->shape.size(); ++d) {
    Var iv("v" + std::to_string(d)), lv("ax" + std::to_string(d));
    iters.push_back(IterVar{iv, src->shape[d], IterKind::kSpatial});
    values.push_back(lv);
    idx.push_back(iv);
    loops.push_back(lv);
  }
  Stmt s = make_block(name, iters, values, Expr(), Stmt(), make_store(dst, idx, make_load(src, idx)));
  for (size_t d = loops.size(); d-- > 0;) s = make_for(loops[d], src->shape[d], ForKind::kSerial, s);
  return s;
}

class SwapBuffer : public IRMutator {
 public:
  SwapBuffer(const Buffer &from, const Buffer &to) : from_(from), to_(to) {}

 protected:
  Buffer mutate_buffer(const Buffer &b) override { return b == from_ ? to_ : b; }

 private:
  Buffer from_, to_;
};

// Swaps a buffer inside one block's init and body only.
Stmt swap_in_block(const BlockNode *b, const Buffer &from, const Buffer &to) {
  SwapBuffer swap(from, to);
  return make_block(b->name, b->iter_vars, b->iter_values, b->predicate, swap.mutate(b->init), swap.mutate(b->body),
                    b->alloc_buffers, b->annotations);
}

// Inserts `s` next to `anchor` (a root-level statement) in the root block's body.
PrimFunc insert_at_root(const PrimFunc &f, const Stmt &anchor, const Stmt &s, bool before) {
  const BlockNode *root = f.root();
  std::vector<Stmt> stmts;
  if (const auto *seq = root->body.as<SeqNode>()) {
    stmts = seq->stmts;
  } else {
    stmts = {root->body};
  }
  std::vector<Stmt> out;
  for (const Stmt &x : stmts) {
    if (x.same_as(anchor) && before) out.push_back(s);
    out.push_back(x);
    if (x.same_as(anchor) && !before) out.push_back(s);
  }
  return with_body(f, make_block(root->name, root->iter_vars, root->iter_values, root->predicate, root->init,
                                 make_seq(std::move(out)), root->alloc_buffers, root->annotations));
}

}  // namespace

PrimFunc cache_read(const PrimFunc &f, const std::string &block, int read_index, MemoryScope scope,
                    std::string *cache_block) {
  const std::string primitive = "cache_read";
  Stmt block_stmt = find_block(f, block, primitive);
  const BlockNode *b = block_stmt.as<BlockNode>();
  std::vector<Buffer> reads = distinct_buffers(block_reads(b));
  if (read_index < 0 || read_index >= static_cast<int>(reads.size()))
    throw ScheduleError(primitive, "block '" + block + "' reads " + std::to_string(reads.size()) +
                                       " buffers; read index " + std::to_string(read_index) + " is out of range");
  Buffer src = reads[read_index];
  if (writes_buffer(b, src.get()))
    throw ScheduleError(primitive, "block '" + block + "' also writes '" + src->name + "'; use cache_write for it");
  Stmt anchor = root_level_stmt(f, b);
  for (const BlockNode *w : all_blocks(f)) {
    if (w != b && writes_buffer(w, src.get()) && root_level_stmt(f, w).same_as(anchor))
      throw ScheduleError(primitive, "'" + src->name + "' is produced inside the same loop nest as block '" + block +
                                         "'; cache it before moving its producer there");
  }
  std::string scope_str = scope_name(scope);
  Buffer dst = make_buffer(fresh_buffer_name(f, src->name + "_" + scope_str), src->dtype, src->shape, scope);
  *cache_block = fresh_block_name(f, src->name + "_" + scope_str);
  PrimFunc g = with_body(f, replace_stmt(f.body, block_stmt.get(), swap_in_block(b, src, dst)));
  g = insert_at_root(g, root_level_stmt(g, find_block(g, block, primitive).get()), copy_nest(*cache_block, src, dst),
                     /*before=*/true);
  return add_root_alloc(g, dst);
}

PrimFunc cache_write(const PrimFunc &f, const std::string &block, int write_index, MemoryScope scope,
                     std::string *cache_block) {
  const std::string primitive = "cache_write";
  Stmt block_stmt = find_block(f, block, primitive);
  const BlockNode *b = block_stmt.as<BlockNode>();
  std::vector<Buffer> writes = distinct_buffers(block_writes(b));
  if (write_index < 0 || write_index >= static_cast<int>(writes.size()))
    throw ScheduleError(primitive, "block '" + block + "' writes " + std::to_string(writes.size()) +
                                       " buffers; write index " + std::to_string(write_index) + " is out of range");
  Buffer dst = writes[write_index];
  Stmt anchor = root_level_stmt(f, b);
  for (const BlockNode *other : all_blocks(f)) {
    if (other == b) continue;
    if (writes_buffer(other, dst.get()))
      throw ScheduleError(primitive, "'" + dst->name + "' is also written by block '" + other->name + "'");
    if (reads_buffer(other, dst.get()) && root_level_stmt(f, other).same_as(anchor))
      throw ScheduleError(primitive, "block '" + other->name + "' reads '" + dst->name +
                                         "' inside the same loop nest as block '" + block +
                                         "', before the cached value would be written back");
  }
  std::string scope_str = scope_name(scope);
  Buffer cache = make_buffer(fresh_buffer_name(f, dst->name + "_" + scope_str), dst->dtype, dst->shape, scope);
  *cache_block = fresh_block_name(f, dst->name + "_" + scope_str);
  PrimFunc g = with_body(f, replace_stmt(f.body, block_stmt.get(), swap_in_block(b, dst, cache)));
  g = insert_at_root(g, root_level_stmt(g, find_block(g, block, primitive).get()), copy_nest(*cache_block, cache, dst),
                     /*before=*/false);
  return add_root_alloc(g, cache);
}

}  // namespace kiln::ir::sched
