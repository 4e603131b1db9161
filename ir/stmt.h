// Loop-nest programs (TIR): statements, blocks and functions.
//
// A Block is the unit of computation schedules move around: it names its iterators
// (spatial or reduce, each with domain [0, extent)), binds them to loop expressions
// (`iter_values`), and runs `body` for every binding where `predicate` holds. A
// reduction block's `init` runs right before the first update of an output element,
// i.e. when every reduce iterator's value is 0. Loops always start at 0 and have a
// constant extent; split/fuse/compute_at express offsets through block bindings.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace kiln::ir {

#define KILN_STMT_NODES(X) \
  X(For)                   \
  X(Seq)                   \
  X(Block)                 \
  X(Store)                 \
  X(IfThenElse)            \
  X(Barrier)               \
  X(ThreadAllReduce)

enum class StmtKind : uint8_t {
#define KILN_ENUM(N) k##N,
  KILN_STMT_NODES(KILN_ENUM)
#undef KILN_ENUM
};

struct StmtNode {
  explicit StmtNode(StmtKind kind) : kind(kind) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode *get() const { return node_.get(); }
  const StmtNode *operator->() const { return node_.get(); }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt &other) const { return node_ == other.node_; }
  template <typename T>
  const T *as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T *>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

template <StmtKind K>
struct StmtNodeOf : StmtNode {
  static constexpr StmtKind kKind = K;
  StmtNodeOf() : StmtNode(K) {}
};

enum class ForKind : uint8_t { kSerial, kParallel, kVectorized, kUnrolled, kThreadBinding };
const char *for_kind_name(ForKind k);

/// Integer-valued annotations (e.g. "pragma_auto_unroll_max_step" -> 64), ordered for
/// deterministic printing and hashing.
using Annotations = std::map<std::string, int64_t>;

struct ForNode : StmtNodeOf<StmtKind::kFor> {
  Var loop_var;
  int64_t extent = 1;
  ForKind for_kind = ForKind::kSerial;
  std::string thread_tag;  // "blockIdx.x", "threadIdx.y", ... for kThreadBinding
  Annotations annotations;
  Stmt body;
};

struct SeqNode : StmtNodeOf<StmtKind::kSeq> {
  std::vector<Stmt> stmts;
};

struct BlockNode : StmtNodeOf<StmtKind::kBlock> {
  std::string name;
  std::vector<IterVar> iter_vars;
  std::vector<Expr> iter_values;  // one per iter var, in terms of enclosing loop vars
  Expr predicate;                 // kBool; true when all bindings are in range
  Stmt init;                      // reductions only; may be undefined
  Stmt body;
  std::vector<Buffer> alloc_buffers;  // intermediates that live in this block's scope
  Annotations annotations;
};

struct StoreNode : StmtNodeOf<StmtKind::kStore> {
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
};

struct IfThenElseNode : StmtNodeOf<StmtKind::kIfThenElse> {
  Expr cond;
  Stmt then_case;
  Stmt else_case;  // may be undefined
};

/// A GPU thread block's barrier (`__syncthreads`): every thread of the block waits here
/// until all have arrived, and what they wrote to shared memory before it is visible to
/// all after it. Inserted by ir::lower_for_gpu, never by schedules; only positions that
/// every thread of the block reaches may hold one. Sequential execution ignores it.
struct BarrierNode : StmtNodeOf<StmtKind::kBarrier> {};

/// A reduction across the threads of a GPU block, made by ir::lower_for_gpu from a
/// reduction loop bound to threadIdx: each thread holds a partial result in `value` (a
/// local buffer of one element); afterwards every thread of each group of `extent`
/// threads along thread axis `axis` (0, 1, 2 for x, y, z; the other indices equal)
/// holds the group's partials combined. Every thread of the block reaches it.
/// `scratch` (shared, one element per warp of each group) is there when a group spans
/// several warps; sequential execution has no meaning for it.
struct ThreadAllReduceNode : StmtNodeOf<StmtKind::kThreadAllReduce> {
  Combiner combiner = Combiner::kSum;
  Buffer value;
  Buffer scratch;  // null when a group fits in one warp
  int axis = 0;
  int64_t extent = 1;
};

Stmt make_for(Var loop_var, int64_t extent, ForKind kind, Stmt body, std::string thread_tag = "",
              Annotations annotations = {});
/// Flattens nested sequences; a one-element sequence is the element itself.
Stmt make_seq(std::vector<Stmt> stmts);
Stmt make_block(std::string name, std::vector<IterVar> iter_vars, std::vector<Expr> iter_values, Expr predicate,
                Stmt init, Stmt body, std::vector<Buffer> alloc_buffers = {}, Annotations annotations = {});
Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value);
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = Stmt());
Stmt make_barrier();
Stmt make_thread_allreduce(Combiner combiner, Buffer value, Buffer scratch, int axis, int64_t extent);

/// Copy-on-write helpers for schedule primitives.
Stmt with_body(const ForNode *loop, Stmt body);
Stmt with_for_kind(const ForNode *loop, ForKind kind, std::string thread_tag = "");

/// A node of a program held by a handle that keeps it alive (through `owner`, any
/// statement the node is part of, such as the program's root): unlike a raw pointer it
/// stays valid after a schedule primitive replaces the program, though it then
/// describes the program as it was when it was looked up.
template <typename T>
class NodeRef {
 public:
  NodeRef() = default;
  explicit NodeRef(Stmt node) : owner_(std::move(node)), node_(owner_.as<T>()) {}
  NodeRef(Stmt owner, const T *node) : owner_(std::move(owner)), node_(node) {}
  const T *get() const { return node_; }
  const T *operator->() const { return node_; }
  const T &operator*() const { return *node_; }
  explicit operator bool() const { return node_ != nullptr; }

 private:
  Stmt owner_;
  const T *node_ = nullptr;
};

/// A function over buffers: parameters are inputs then outputs; the body is the root
/// block, whose alloc_buffers hold the intermediates.
struct PrimFunc {
  std::string name;
  std::vector<Buffer> params;
  Stmt body;
  /// Indices of parameters whose data is fixed when the program is compiled (weights):
  /// ir::rewrite_constant_layouts may move their packing ahead of time.
  std::vector<size_t> constant_params;
  /// Returns the root block node.
  const BlockNode *root() const { return body.as<BlockNode>(); }
};

/// Readable text of IR, used by error messages and `kiln show`.
std::string to_string(const Expr &e);
std::string to_string(const Stmt &s);
std::string to_string(const PrimFunc &f);

}  // namespace kiln::ir
