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

int64_t spatial_size(const BlockNode *b) {
  int64_t n = 1;
  for (const IterVar &iv : b->iter_vars)
    if (iv.kind == IterKind::kSpatial) n *= iv.extent;
  return n;
}

}  // namespace kiln::search
