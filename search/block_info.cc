#include "search/block_info.h"

#include "ir/functor.h"

namespace kiln::search {

using namespace ir;  // NOLINT: queries over IR nodes

NodeRef<BlockNode> find_block(const Schedule &sch, const std::string &name) {
  for (const BlockNode *b : sched::all_blocks(sch.func()))
    if (b->name == name) return NodeRef<BlockNode>(sch.func().body, b);
  return {};
}

bool has_reduction(const BlockNode *b) {
  for (const IterVar &iv : b->iter_vars)
    if (iv.kind == IterKind::kReduce) return true;
  return false;
}

bool is_elementwise(const BlockNode *b) {
  return !has_reduction(b) && !b->init.defined() && b->body.as<StoreNode>() != nullptr;
}

bool is_padding(const BlockNode *b) {
  if (!is_elementwise(b)) return false;
  const auto *sel = b->body.as<StoreNode>()->value.as<SelectNode>();
  if (!sel) return false;
  auto is_const = [](const Expr &e) { return e.as<FloatImmNode>() || e.as<IntImmNode>(); };
  return (sel->true_value.as<LoadNode>() && is_const(sel->false_value)) ||
         (sel->false_value.as<LoadNode>() && is_const(sel->true_value));
}

std::vector<LoopKind> loop_kinds(const Schedule &sch, const std::string &block) {
  NodeRef<BlockNode> b = find_block(sch, block);
  std::vector<LoopKind> kinds;
  for (const Stmt &s : sched::loops_above(sch.func(), b.get())) {
    const auto *l = s.as<ForNode>();
    bool spatial = false, reduce = false;
    for (size_t k = 0; k < b->iter_vars.size(); ++k) {
      if (!uses_var(b->iter_values[k], l->loop_var.get())) continue;
      (b->iter_vars[k].kind == IterKind::kReduce ? reduce : spatial) = true;
    }
    // A loop that drives nothing (extent 1, folded away) is as harmless as a spatial one.
    kinds.push_back(spatial && reduce ? LoopKind::kMixed : reduce ? LoopKind::kReduce : LoopKind::kSpatial);
  }
  return kinds;
}

LoopRV fuse_loops(Schedule &sch, const std::vector<LoopRV> &loops) {
  return loops.size() == 1 ? loops[0] : sch.fuse(loops);
}

bool bind_spatial_loops(Schedule &sch, const std::string &block, const Factor &threads) {
  std::vector<LoopKind> kinds = loop_kinds(sch, block);
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block(block));
  std::vector<LoopRV> spatial;
  for (size_t i = 0; i < loops.size(); ++i) {
    if (sch.loop(loops[i])->for_kind == ForKind::kThreadBinding) return false;
    if (kinds[i] != LoopKind::kSpatial) break;
    spatial.push_back(loops[i]);
  }
  if (spatial.empty()) return false;
  LoopRV fused = fuse_loops(sch, spatial);
  std::vector<LoopRV> parts = sch.split(fused, {int64_t{-1}, threads});
  sch.bind(parts[0], "blockIdx.x");
  sch.bind(parts[1], "threadIdx.x");
  return true;
}

bool reads_an_input_again(const BlockNode *b) {
  for (const sched::Access &read : sched::block_reads(b)) {
    if (sched::writes_buffer(b, read.buffer.get()) || read.indices.empty()) continue;
    for (const IterVar &iv : b->iter_vars) {
      if (iv.kind != IterKind::kSpatial || iv.extent <= 1) continue;
      bool indexed = false;
      for (const Expr &index : read.indices) indexed = indexed || uses_var(index, iv.var.get());
      if (!indexed) return true;
    }
  }
  return false;
}

std::vector<std::string> consumers_of(const Schedule &sch, const std::string &block) {
  NodeRef<BlockNode> b = find_block(sch, block);
  std::vector<std::string> out;
  if (!b) return out;
  std::vector<Buffer> writes = sched::distinct_buffers(sched::block_writes(b.get()));
  for (const BlockNode *other : sched::all_blocks(sch.func())) {
    if (other == b.get()) continue;
    for (const Buffer &w : writes) {
      if (sched::reads_buffer(other, w.get())) {
        out.push_back(other->name);
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> producers_of(const Schedule &sch, const std::string &block) {
  NodeRef<BlockNode> b = find_block(sch, block);
  std::vector<std::string> out;
  if (!b) return out;
  for (const BlockNode *other : sched::all_blocks(sch.func())) {
    if (other == b.get()) continue;
    for (const Buffer &w : sched::distinct_buffers(sched::block_writes(other))) {
      if (sched::reads_buffer(b.get(), w.get())) {
        out.push_back(other->name);
        break;
      }
    }
  }
  return out;
}

namespace {
// Unrolling more than this many positions grows code faster than it saves branches.
constexpr int64_t kMaxTablePositions = 64;
}  // namespace

std::map<size_t, int64_t> table_positions(const BlockNode *b) {
  std::map<const VarNode *, size_t> index;
  for (size_t k = 0; k < b->iter_vars.size(); ++k) index[b->iter_vars[k].var.get()] = k;
  std::map<size_t, int64_t> period;
  bool other = false;
  auto note = [&](const Expr &x) {
    int64_t divisor = 0;
    const VarNode *v = x.as<VarNode>();
    if (const auto *mod = x.as<FloorModNode>(); mod && as_const_int(mod->b, &divisor))
      v = mod->a.as<VarNode>();
    else if (const auto *div = x.as<FloorDivNode>(); div && as_const_int(div->b, &divisor)) {
      v = div->a.as<VarNode>();
      divisor = 0;  // a quotient compared: the whole iterator is the position
    }
    auto it = v ? index.find(v) : index.end();
    if (it == index.end()) {
      other = true;
      return;
    }
    const int64_t extent = b->iter_vars[it->second].extent;
    // A remainder whose divisor does not divide the extent still unrolls by the divisor:
    // the split's last outer tile is partial and keeps y = yo * m + yi, so y % m is yi.
    int64_t p = divisor > 0 && divisor < extent ? divisor : extent;
    auto [slot, fresh] = period.emplace(it->second, p);
    if (!fresh && slot->second != p) slot->second = extent;  // compared both ways: unroll it whole
  };
  for_each_expr(b->body, [&](const Expr &e) {
    const auto *sel = e.as<SelectNode>();
    if (!sel) return;
    const auto *eq = sel->cond.as<EQNode>();
    int64_t c = 0;
    if (eq && as_const_int(eq->b, &c))
      note(eq->a);
    else
      other = true;
  });
  if (other) return {};
  int64_t positions = 1;
  for (const auto &[k, p] : period) positions *= p;
  if (period.empty() || positions > kMaxTablePositions) return {};
  return period;
}

static int64_t size_of(const BlockNode *b, IterKind kind) {
  int64_t n = 1;
  for (const IterVar &iv : b->iter_vars)
    if (iv.kind == kind) n *= iv.extent;
  return n;
}

int64_t spatial_size(const BlockNode *b) { return size_of(b, IterKind::kSpatial); }

int64_t reduction_size(const BlockNode *b) { return size_of(b, IterKind::kReduce); }

}  // namespace kiln::search
