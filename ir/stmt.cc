#include "ir/stmt.h"

namespace kiln::ir {

const char *for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kThreadBinding:
      return "thread_binding";
  }
  return "?";
}

Stmt make_for(Var loop_var, int64_t extent, ForKind kind, Stmt body, std::string thread_tag, Annotations annotations) {
  if (extent <= 0) throw IRError("loop '" + loop_var.name() + "' has non-positive extent");
  if (!body.defined()) throw IRError("loop '" + loop_var.name() + "' has no body");
  auto n = std::make_shared<ForNode>();
  n->loop_var = std::move(loop_var);
  n->extent = extent;
  n->for_kind = kind;
  n->thread_tag = std::move(thread_tag);
  n->annotations = std::move(annotations);
  n->body = std::move(body);
  return Stmt(std::move(n));
}

Stmt make_seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt &s : stmts) {
    if (!s.defined()) continue;
    if (const auto *seq = s.as<SeqNode>()) {
      flat.insert(flat.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  auto n = std::make_shared<SeqNode>();
  n->stmts = std::move(flat);
  return Stmt(std::move(n));
}

Stmt make_block(std::string name, std::vector<IterVar> iter_vars, std::vector<Expr> iter_values, Expr predicate,
                Stmt init, Stmt body, std::vector<Buffer> alloc_buffers, Annotations annotations) {
  if (iter_vars.size() != iter_values.size())
    throw IRError("block '" + name + "' binds " + std::to_string(iter_values.size()) + " values to " +
                  std::to_string(iter_vars.size()) + " iterators");
  auto n = std::make_shared<BlockNode>();
  n->name = std::move(name);
  n->iter_vars = std::move(iter_vars);
  n->iter_values = std::move(iter_values);
  n->predicate = predicate.defined() ? std::move(predicate) : make_int(1, DType::kBool);
  n->init = std::move(init);
  n->body = std::move(body);
  n->alloc_buffers = std::move(alloc_buffers);
  n->annotations = std::move(annotations);
  return Stmt(std::move(n));
}

Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value) {
  if (indices.size() != buffer->shape.size())
    throw IRError("store to '" + buffer->name + "' has the wrong number of indices");
  if (value.dtype() != buffer->dtype) value = make_cast(buffer->dtype, value);
  for (Expr &i : indices) i = make_cast(DType::kInt64, i);
  auto n = std::make_shared<StoreNode>();
  n->buffer = std::move(buffer);
  n->indices = std::move(indices);
  n->value = std::move(value);
  return Stmt(std::move(n));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  auto n = std::make_shared<IfThenElseNode>();
  n->cond = std::move(cond);
  n->then_case = std::move(then_case);
  n->else_case = std::move(else_case);
  return Stmt(std::move(n));
}

Stmt make_barrier() { return Stmt(std::make_shared<BarrierNode>()); }

Stmt make_thread_allreduce(Combiner combiner, Buffer value, Buffer scratch, int axis, int64_t extent) {
  if (!value || value->shape != std::vector<int64_t>{1})
    throw IRError("a cross-thread reduction combines one-element buffers");
  if (axis < 0 || axis > 2 || extent < 1) throw IRError("a cross-thread reduction needs a thread axis and extent");
  auto n = std::make_shared<ThreadAllReduceNode>();
  n->combiner = combiner;
  n->value = std::move(value);
  n->scratch = std::move(scratch);
  n->axis = axis;
  n->extent = extent;
  return Stmt(std::move(n));
}

Stmt with_body(const ForNode *loop, Stmt body) {
  return make_for(loop->loop_var, loop->extent, loop->for_kind, std::move(body), loop->thread_tag, loop->annotations);
}

Stmt with_for_kind(const ForNode *loop, ForKind kind, std::string thread_tag) {
  return make_for(loop->loop_var, loop->extent, kind, loop->body, std::move(thread_tag), loop->annotations);
}

}  // namespace kiln::ir
