// compute_at, reverse_compute_at, compute_inline, reverse_compute_inline.
#include <algorithm>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/schedule/primitives.h"

namespace kiln::ir::sched {
namespace {

const BlockNode *as_block(const Stmt &s) { return s.as<BlockNode>(); }

// The single buffer a block writes; moving blocks that write several is not supported.
Buffer single_write(const std::string &primitive, const BlockNode *b) {
  std::vector<Buffer> bufs = distinct_buffers(block_writes(b));
  if (bufs.size() != 1)
    throw ScheduleError(primitive, "block '" + b->name + "' writes " + std::to_string(bufs.size()) +
                                       " buffers; only single-output blocks can be moved");
  return bufs[0];
}

// Index d of the write is exactly iterator var_of_dim[d] (a spatial iterator).
std::vector<int> trivial_write_dims(const std::string &primitive, const BlockNode *b, const Buffer &buf) {
  std::vector<int> iter_of_dim;
  for (const Access &w : block_writes(b)) {
    std::vector<int> dims;
    for (const Expr &idx : w.indices) {
      int found = -1;
      for (size_t k = 0; k < b->iter_vars.size(); ++k)
        if (idx.get() == b->iter_vars[k].var.get() && b->iter_vars[k].kind == IterKind::kSpatial)
          found = static_cast<int>(k);
      if (found < 0)
        throw ScheduleError(primitive, "block '" + b->name + "' writes " + buf->name + " at index '" + to_string(idx) +
                                           "', not at one of its spatial iterators");
      dims.push_back(found);
    }
    if (!iter_of_dim.empty() && iter_of_dim != dims)
      throw ScheduleError(primitive, "block '" + b->name + "' writes " + buf->name + " at different positions");
    iter_of_dim = dims;
  }
  return iter_of_dim;
}

// Builds the loop nest that runs `b` over the given region of its spatial iterators
// (region dims map to iterators through iter_of_dim) and its full reduction domain.
Stmt regenerate_nest(const BlockNode *b, const std::vector<int> &iter_of_dim, const Region &region,
                     const Analyzer &outer) {
  std::vector<Var> loop_vars(b->iter_vars.size());
  std::vector<int64_t> extents(b->iter_vars.size());
  std::vector<Expr> values(b->iter_vars.size());
  Analyzer analyzer = outer;
  Expr pred = make_int(1, DType::kBool);
  std::vector<int> order;
  for (size_t k = 0; k < b->iter_vars.size(); ++k) {
    const IterVar &iv = b->iter_vars[k];
    std::string name = iv.var.name();
    if (name.size() > 1 && name[0] == 'v') name = name.substr(1);
    if (isdigit(static_cast<unsigned char>(name[0]))) name = "ax" + name;
    loop_vars[k] = Var(name);
    extents[k] = iv.extent;
    values[k] = loop_vars[k];
  }
  for (size_t d = 0; d < iter_of_dim.size(); ++d) {
    int k = iter_of_dim[d];
    extents[k] = region.extent[d];
    values[k] = make_add(region.min[d], loop_vars[k]);
  }
  for (size_t k = 0; k < b->iter_vars.size(); ++k) analyzer.bind(loop_vars[k], extents[k]);
  for (size_t k = 0; k < b->iter_vars.size(); ++k) {
    Expr in_range = make_and(make_cmp(ExprKind::kGE, values[k], make_int(0)),
                             make_cmp(ExprKind::kLT, values[k], make_int(b->iter_vars[k].extent)));
    in_range = analyzer.simplify(in_range);
    if (!is_const_int(in_range, 1)) pred = make_and(pred, in_range);
  }
  // Spatial loops outside, reduction loops inside, each in iterator order.
  for (size_t k = 0; k < b->iter_vars.size(); ++k)
    if (b->iter_vars[k].kind == IterKind::kSpatial) order.push_back(static_cast<int>(k));
  for (size_t k = 0; k < b->iter_vars.size(); ++k)
    if (b->iter_vars[k].kind == IterKind::kReduce) order.push_back(static_cast<int>(k));
  Stmt s = make_block(b->name, b->iter_vars, values, pred, b->init, b->body, b->alloc_buffers, b->annotations);
  for (size_t i = order.size(); i-- > 0;) s = make_for(loop_vars[order[i]], extents[order[i]], ForKind::kSerial, s);
  return s;
}

// Inserts `nest` at the front (or back) of `loop`'s body and removes `moved` from its old
// place, in one rewrite.
PrimFunc move_into_loop(const PrimFunc &f, const Stmt &moved, const Stmt &loop_stmt, const Stmt &nest, bool at_front) {
  const auto *loop = loop_stmt.as<ForNode>();
  Stmt body = at_front ? make_seq({nest, loop->body}) : make_seq({loop->body, nest});
  Stmt new_loop = kiln::ir::with_body(loop, body);
  Stmt root = replace_stmt(f.body, loop_stmt.get(), new_loop);
  root = replace_stmt(root, moved.get(), Stmt());
  return simplify_func(with_body(f, root));
}

bool is_ancestor(const PrimFunc &f, const StmtNode *ancestor, const StmtNode *node) {
  for (const Stmt &s : path_to(f.body, node))
    if (s.get() == ancestor) return true;
  return false;
}

// The block and loop a compute-location primitive works on; the block must not be
// inside the loop already.
struct MoveTarget {
  const BlockNode *block;
  Stmt loop_stmt;
  const ForNode *loop;
  Analyzer outer;  // ranges of the loop and the loops around it
};

MoveTarget move_target(const std::string &primitive, const PrimFunc &f, const std::string &block, const Var &loop_var) {
  MoveTarget t;
  t.block = as_block(find_block(f, block, primitive));
  t.loop_stmt = find_loop(f, loop_var.get());
  if (!t.loop_stmt.defined()) throw ScheduleError(primitive, "loop '" + loop_var.name() + "' no longer exists");
  t.loop = t.loop_stmt.as<ForNode>();
  if (is_ancestor(f, t.loop, t.block))
    throw ScheduleError(primitive, "block '" + block + "' is already inside " + describe_loop(t.loop));
  for (const Stmt &s : path_to(f.body, t.loop)) {
    if (const auto *l = s.as<ForNode>()) t.outer.bind(l->loop_var, l->extent);
  }
  return t;
}

// For a consumer `c` of `produced`: the iterator reading each dimension of it. Every
// read must be at the same distinct spatial iterators, and those must span the whole
// buffer, so that covering what the producer wrote covers the consumer's domain.
std::vector<int> consumer_read_dims(const std::string &primitive, const BlockNode *c, const Buffer &produced) {
  const std::string &block = c->name;
  std::vector<int> iter_of_dim;
  for (const Access &a : block_reads(c)) {
    if (a.buffer != produced) continue;
    std::vector<int> dims;
    for (const Expr &idx : a.indices) {
      int found = -1;
      for (size_t k = 0; k < c->iter_vars.size(); ++k)
        if (idx.get() == c->iter_vars[k].var.get()) found = static_cast<int>(k);
      if (found < 0 || c->iter_vars[found].kind != IterKind::kSpatial)
        throw ScheduleError(primitive, "block '" + block + "' reads '" + produced->name + "' at index '" +
                                           to_string(idx) + "', which is not one of its spatial iterators");
      if (std::count(dims.begin(), dims.end(), found))
        throw ScheduleError(primitive, "block '" + block + "' uses iterator '" + c->iter_vars[found].var.name() +
                                           "' for two dimensions of '" + produced->name + "'");
      dims.push_back(found);
    }
    if (!iter_of_dim.empty() && dims != iter_of_dim)
      throw ScheduleError(primitive, "block '" + block + "' reads '" + produced->name + "' at several positions");
    iter_of_dim = dims;
  }
  for (size_t d = 0; d < iter_of_dim.size(); ++d) {
    if (c->iter_vars[iter_of_dim[d]].extent != produced->shape[d])
      throw ScheduleError(
          primitive, "block '" + block + "' iterates over " + std::to_string(c->iter_vars[iter_of_dim[d]].extent) +
                         " positions of dimension " + std::to_string(d) + " of '" + produced->name + "', which has " +
                         std::to_string(produced->shape[d]) + "; the consumer must cover its input exactly");
  }
  return iter_of_dim;
}

// What compute_at moves where, once every check has passed.
struct ComputeAtPlan {
  MoveTarget target;
  std::vector<int> iter_of_dim;
  Region region;
};

ComputeAtPlan plan_compute_at(const PrimFunc &f, const std::string &block, const Var &loop_var) {
  const std::string primitive = "compute_at";
  MoveTarget target = move_target(primitive, f, block, loop_var);
  const BlockNode *b = target.block;
  const Stmt &loop_stmt = target.loop_stmt;
  const ForNode *loop = target.loop;
  Buffer out = single_write(primitive, b);
  std::vector<int> iter_of_dim = trivial_write_dims(primitive, b, out);
  for (const BlockNode *other : all_blocks(f)) {
    if (other != b && writes_buffer(other, out.get()))
      throw ScheduleError(primitive, "buffer '" + out->name + "' is written by blocks '" + block + "' and '" +
                                         other->name + "'; only a sole producer can be moved");
  }
  int pos = program_position(f, b);
  std::vector<const BlockNode *> under = blocks_under(loop_stmt);
  if (under.empty() || program_position(f, under.front()) < pos)
    throw ScheduleError(primitive, describe_loop(loop) + " comes before block '" + block +
                                       "'; a producer can only move into a later loop that consumes it");
  std::unordered_set<const BlockNode *> under_set(under.begin(), under.end());
  std::vector<const BlockNode *> consumers;
  std::vector<Buffer> inputs = distinct_buffers(block_reads(b));
  int loop_end = program_position(f, under.back());
  for (const BlockNode *other : all_blocks(f)) {
    if (other == b) continue;
    if (reads_buffer(other, out.get())) {
      if (!under_set.count(other))
        throw ScheduleError(primitive, "block '" + other->name + "' reads '" + out->name + "' but is not under " +
                                           describe_loop(loop) +
                                           ", so the loop does not cover every consumer's region");
      consumers.push_back(other);
    }
    int p = program_position(f, other);
    if (p > pos && p <= loop_end) {
      for (const Buffer &in : inputs)
        if (writes_buffer(other, in.get()))
          throw ScheduleError(primitive, "block '" + other->name + "' writes '" + in->name + "', which block '" +
                                             block + "' reads, between the block and its new position");
    }
  }
  if (consumers.empty())
    throw ScheduleError(primitive, "no block under " + describe_loop(loop) + " reads '" + out->name + "'");

  // The region of `out` the consumers under the loop read, per iteration of the loop.
  Region region = region_under_loop(f, out, consumers, loop, /*reads=*/true, /*writes=*/false, primitive);
  return {std::move(target), std::move(iter_of_dim), std::move(region)};
}

}  // namespace

void check_compute_at(const PrimFunc &f, const std::string &block, const Var &loop_var) {
  plan_compute_at(f, block, loop_var);
}

PrimFunc compute_at(const PrimFunc &f, const std::string &block, const Var &loop_var) {
  ComputeAtPlan plan = plan_compute_at(f, block, loop_var);
  const BlockNode *b = plan.target.block;
  Stmt nest = regenerate_nest(b, plan.iter_of_dim, plan.region, plan.target.outer);
  return move_into_loop(f, exclusive_subtree(f, b), plan.target.loop_stmt, nest, /*at_front=*/true);
}

PrimFunc reverse_compute_at(const PrimFunc &f, const std::string &block, const Var &loop_var) {
  const std::string primitive = "reverse_compute_at";
  MoveTarget target = move_target(primitive, f, block, loop_var);
  const BlockNode *c = target.block;
  const Stmt &loop_stmt = target.loop_stmt;
  const ForNode *loop = target.loop;
  Buffer out = single_write(primitive, c);
  std::vector<const BlockNode *> under = blocks_under(loop_stmt);
  int pos = program_position(f, c);
  if (under.empty() || program_position(f, under.back()) > pos)
    throw ScheduleError(primitive, describe_loop(loop) + " comes after block '" + block +
                                       "'; a consumer can only move into an earlier loop that produces its input");
  // Exactly one buffer the block reads must be produced under the loop.
  std::vector<Buffer> inputs = distinct_buffers(block_reads(c));
  Buffer produced;
  std::vector<const BlockNode *> producers;
  for (const Buffer &in : inputs) {
    if (in == out) continue;
    std::vector<const BlockNode *> writers;
    for (const BlockNode *u : under)
      if (writes_buffer(u, in.get())) writers.push_back(u);
    if (writers.empty()) continue;
    if (produced)
      throw ScheduleError(primitive, "block '" + block + "' reads both '" + produced->name + "' and '" + in->name +
                                         "' produced under " + describe_loop(loop) +
                                         "; only one produced input is supported");
    produced = in;
    producers = writers;
  }
  if (!produced)
    throw ScheduleError(
        primitive, "no block under " + describe_loop(loop) + " produces a buffer that block '" + block + "' reads");
  int loop_end = program_position(f, under.back());
  for (const BlockNode *other : all_blocks(f)) {
    int p = program_position(f, other);
    if (p <= loop_end || p >= pos) continue;
    for (const Buffer &in : inputs)
      if (writes_buffer(other, in.get()))
        throw ScheduleError(primitive, "block '" + other->name + "' writes '" + in->name + "', which block '" + block +
                                           "' reads, between the loop and the block");
    if (reads_buffer(other, out.get()) || writes_buffer(other, out.get()))
      throw ScheduleError(primitive, "block '" + other->name + "' accesses '" + out->name +
                                         "' between the loop and block '" + block + "'");
  }
  std::vector<int> iter_of_dim = consumer_read_dims(primitive, c, produced);

  Region region = region_under_loop(f, produced, producers, loop, /*reads=*/false, /*writes=*/true, primitive);
  Stmt nest = regenerate_nest(c, iter_of_dim, region, target.outer);
  return move_into_loop(f, exclusive_subtree(f, c), loop_stmt, nest, /*at_front=*/false);
}

namespace {
// Replaces loads of `buffer` by `value` with the producer's iterators substituted.
class InlineLoads : public IRMutator {
 public:
  InlineLoads(const Buffer &buffer, std::vector<const VarNode *> iters, Expr value)
      : buffer_(buffer), iters_(std::move(iters)), value_(std::move(value)) {}

 protected:
  Expr visit(const LoadNode *op, const Expr &self) override {
    if (op->buffer != buffer_) return IRMutator::visit(op, self);
    VarMap map;
    for (size_t d = 0; d < iters_.size(); ++d) map[iters_[d]] = mutate(op->indices[d]);
    return substitute(value_, map);
  }

 private:
  Buffer buffer_;
  std::vector<const VarNode *> iters_;
  Expr value_;
};

// The single store of a spatial block: B[iters...] = value.
const StoreNode *single_spatial_store(const std::string &primitive, const BlockNode *b) {
  if (b->init.defined())
    throw ScheduleError(primitive, "block '" + b->name + "' is a reduction; only element-wise blocks can be inlined");
  for (const IterVar &iv : b->iter_vars)
    if (iv.kind == IterKind::kReduce)
      throw ScheduleError(primitive, "block '" + b->name + "' has reduction iterator '" + iv.var.name() +
                                         "'; only element-wise blocks can be inlined");
  const auto *store = b->body.as<StoreNode>();
  if (!store) throw ScheduleError(primitive, "block '" + b->name + "' is not a single store");
  return store;
}

// compute_inline's checks; returns the block's store and its iterators in index order.
const StoreNode *check_inline(const PrimFunc &f, const BlockNode *b, std::vector<const VarNode *> &iters) {
  const std::string primitive = "compute_inline";
  const std::string &block = b->name;
  const StoreNode *store = single_spatial_store(primitive, b);
  if (is_param(f, store->buffer.get()))
    throw ScheduleError(primitive, "block '" + block + "' writes the function output '" + store->buffer->name +
                                       "'; outputs cannot be inlined");
  for (const Expr &idx : store->indices) {
    const auto *v = idx.as<VarNode>();
    bool is_iter = false;
    for (const IterVar &iv : b->iter_vars) is_iter = is_iter || iv.var.get() == v;
    if (!v || !is_iter || std::count(iters.begin(), iters.end(), v))
      throw ScheduleError(primitive, "block '" + block + "' stores to " + store->buffer->name +
                                         " at an index that is not a distinct iterator; it cannot be inlined");
    iters.push_back(v);
  }
  if (iters.size() != b->iter_vars.size())
    throw ScheduleError(primitive, "block '" + block + "' has iterators that do not index its output");
  if (reads_buffer(b, store->buffer.get()))
    throw ScheduleError(primitive, "block '" + block + "' reads its own output");
  for (const BlockNode *other : all_blocks(f))
    if (other != b && writes_buffer(other, store->buffer.get()))
      throw ScheduleError(primitive,
                          "buffer '" + store->buffer->name + "' has another writer, block '" + other->name + "'");
  return store;
}
}  // namespace

void check_compute_inline(const PrimFunc &f, const std::string &block) {
  std::vector<const VarNode *> iters;
  check_inline(f, as_block(find_block(f, block, "compute_inline")), iters);
}

PrimFunc compute_inline(const PrimFunc &f, const std::string &block) {
  Stmt block_stmt = find_block(f, block, "compute_inline");
  const BlockNode *b = as_block(block_stmt);
  std::vector<const VarNode *> iters;
  const StoreNode *store = check_inline(f, b, iters);
  InlineLoads inliner(store->buffer, iters, store->value);
  Stmt root = replace_stmt(f.body, exclusive_subtree(f, b).get(), Stmt());
  // Only the nests that read the buffer change; the rest is not simplified again (an
  // element-wise chain inlined block by block would otherwise cost its length squared).
  return remove_root_alloc(rewrite_root_level(with_body(f, root), [&](const Stmt &s) { return inliner.mutate(s); }),
                           store->buffer);
}

PrimFunc reverse_compute_inline(const PrimFunc &f, const std::string &block) {
  const std::string primitive = "reverse_compute_inline";
  Stmt block_stmt = find_block(f, block, primitive);
  const BlockNode *c = as_block(block_stmt);
  const StoreNode *cstore = single_spatial_store(primitive, c);
  // The consumer reads exactly one intermediate produced by exactly one other block.
  std::vector<Buffer> inputs = distinct_buffers(block_reads(c));
  const BlockNode *producer = nullptr;
  Buffer produced;
  for (const Buffer &in : inputs) {
    if (is_param(f, in.get())) continue;
    for (const BlockNode *other : all_blocks(f)) {
      if (other == c || !writes_buffer(other, in.get())) continue;
      if (producer)
        throw ScheduleError(primitive,
                            "block '" + block + "' reads several intermediates; it must have a single producer");
      producer = other;
      produced = in;
    }
  }
  if (!producer) throw ScheduleError(primitive, "block '" + block + "' has no producer block to inline into");
  if (producer->init.defined())
    throw ScheduleError(primitive, "block '" + block + "' reads '" + produced->name + "' from block '" +
                                       producer->name +
                                       "', a reduction; a consumer can only be inlined into an element-wise producer");
  const StoreNode *pstore = single_spatial_store(primitive, producer);
  if (program_position(f, producer) > program_position(f, c))
    throw ScheduleError(primitive, "the producer of block '" + block + "' comes after it");
  for (const BlockNode *other : all_blocks(f))
    if (other != c && other != producer && reads_buffer(other, produced.get()))
      throw ScheduleError(primitive, "buffer '" + produced->name + "' is also read by block '" + other->name +
                                         "'; block '" + block + "' must be its only consumer");
  std::vector<int> iter_of_dim = consumer_read_dims(primitive, c, produced);
  if (iter_of_dim.size() != c->iter_vars.size())
    throw ScheduleError(primitive, "block '" + block + "' has iterators that do not index '" + produced->name + "'");
  // Consumer iterator k becomes the producer's store index for the dimension it reads.
  VarMap to_producer;
  for (size_t d = 0; d < iter_of_dim.size(); ++d)
    to_producer[c->iter_vars[iter_of_dim[d]].var.get()] = pstore->indices[d];
  class ReplaceProduced : public IRMutator {
   public:
    ReplaceProduced(const Buffer &b, Expr v) : b_(b), v_(std::move(v)) {}

   protected:
    Expr visit(const LoadNode *op, const Expr &self) override {
      return op->buffer == b_ ? v_ : IRMutator::visit(op, self);
    }

   private:
    Buffer b_;
    Expr v_;
  } replace(produced, pstore->value);
  Expr value = replace.mutate(substitute(cstore->value, to_producer));
  std::vector<Expr> indices;
  for (const Expr &i : cstore->indices) indices.push_back(substitute(i, to_producer));
  Stmt new_producer =
      make_block(producer->name, producer->iter_vars, producer->iter_values, producer->predicate, Stmt(),
                 make_store(cstore->buffer, indices, value), producer->alloc_buffers, producer->annotations);
  const StmtNode *producer_node = path_to(f.body, producer).back().get();
  Stmt root = replace_stmt(f.body, producer_node, new_producer);
  PrimFunc g = with_body(f, root);
  root = replace_stmt(g.body, exclusive_subtree(g, find_block(g, block, primitive).get()).get(), Stmt());
  return simplify_func(remove_root_alloc(with_body(g, root), produced));
}

}  // namespace kiln::ir::sched
