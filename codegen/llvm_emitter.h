// The LLVM IR emitter behind lower_to_llvm (internal to codegen): one class walks the
// program, with its expressions, control flow and buffers in lower_llvm.cc, vector
// memory accesses (the lane patterns of loads and stores) in emit_vector_access.cc, and
// parallel loops (outlined task functions) in emit_parallel.cc.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <array>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/functor.h"
#include "ir/gpu_lower.h"
#include "ir/simplify.h"
#include "target/target.h"

namespace kiln::codegen::detail {

using namespace ir;  // NOLINT: the emitter translates IR nodes one by one

// Loops with at most this many iterations are unrolled by copying the body; longer
// unrolled loops get LLVM's full-unroll hint instead.
constexpr int64_t kMaxExplicitUnroll = 64;
// A serial loop whose body runs more statements than this per iteration is kept from
// LLVM's loop vectorizer. Its dependence analysis is quadratic in the body's memory
// accesses: on a loop Kiln had unrolled 448 statements into (a sampled 3x3 convolution
// tile) it took 6 of the build's 7 seconds and vectorized nothing. Kiln's own
// vectorization is the search's decision; the vectorizer stays on for small bodies.
constexpr int64_t kMaxAutoVectorizedBody = 64;
// Intermediate buffers up to this size live on the stack; larger ones in the workspace.
constexpr int64_t kMaxStackBytes = 64 * 1024;
// The largest loop over a GPU thread's local array that is unrolled so the array stays
// in registers (statements it runs in all).
constexpr int64_t kMaxGpuUnrolledLocalLoop = 1024;
// A program whose unrolled loops (unrolled ones, and serial ones under an auto-unroll
// pragma that emit_for copies out) would emit more statements than this is refused
// before any LLVM IR is made: a 256^3 matrix product with its three loops unrolled is
// 16.7 million statements, which LLVM would work on until the build timeout, or without
// end where nothing times the build.
constexpr int64_t kMaxUnrolledStatements = 65536;

/// Throws CodegenError naming the unrolled loops when `func` would emit more than
/// kMaxUnrolledStatements statements once its unrolled loops are copied out (emit_for's
/// decisions: unrolled loops of any extent, serial ones that an auto-unroll pragma
/// covers).
void check_unrolled_size(const PrimFunc &func);

/// Whether `e` reads memory anywhere.
bool contains_load(const Expr &e);

/// Assigns a value for the rest of a scope and restores the old one at its end (the
/// lanes being generated, the auto-unroll depth of the loops inside).
template <typename T>
class ScopedAssign {
 public:
  ScopedAssign(T &variable, T value) : variable_(variable), saved_(variable) { variable_ = value; }
  ~ScopedAssign() { variable_ = saved_; }
  ScopedAssign(const ScopedAssign &) = delete;
  ScopedAssign &operator=(const ScopedAssign &) = delete;

 private:
  T &variable_;
  T saved_;
};

class CodeGen : public ExprFunctor<llvm::Value *>, public StmtFunctor<void> {
 public:
  CodeGen(llvm::LLVMContext &ctx, llvm::Module &mod, const Target &target)
      : ctx_(ctx), mod_(mod), b_(ctx), target_(target) {}

  /// Emits `func` as an internal function and an exported `entry_symbol(void **args)`
  /// that unpacks the argument array (kiln_entry's convention).
  void emit_function(const PrimFunc &func, const char *entry_symbol);

  /// Emits one GPU kernel as an NVPTX kernel function named `kernel.name`, taking one
  /// pointer per buffer of `buffers` (the program's parameters, then its global
  /// scratch); shared buffers live in the dynamic shared memory the launch reserves.
  void emit_kernel(const GpuKernel &kernel, const std::vector<Buffer> &buffers);

 private:
  // ---- alias information ----------------------------------------------------------------
  // Distinct buffers never overlap. Every access carries its buffer's scope and "noalias"
  // with all others, which survives outlining into task functions (where the pointers
  // come from a closure and LLVM could otherwise assume the worst).
  void make_alias_scopes(const PrimFunc &func);
  llvm::Value *tag(llvm::Value *v, const Buffer &buf);

  // ---- types and helpers ----------------------------------------------------------------
  llvm::Type *scalar_type(DType t);
  // Booleans are stored as bytes; bfloat16 as its 16 bits, and held in float32 registers
  // (LLVM 16 has no bfloat16 arithmetic on CPUs).
  llvm::Type *storage_type(DType t) {
    if (t == DType::kBool) return b_.getInt8Ty();
    if (t == DType::kBFloat16) return b_.getInt16Ty();
    return scalar_type(t);
  }
  // bfloat16's 16 bits (i16, or a vector of them) to float32, and float32 to them rounded
  // to nearest even with NaN kept (ir/host_tensor.h's float_to_bfloat16, lane by lane).
  llvm::Value *bfloat16_bits_to_float(llvm::Value *bits);
  llvm::Value *float_to_bfloat16_bits(llvm::Value *f);
  llvm::Type *value_type(DType t);

  void add_cpu_attrs(llvm::Function *f);

  llvm::FunctionCallee runtime_fn(const char *name, llvm::Type *ret, std::vector<llvm::Type *> params);

  bool is_vec(llvm::Value *v) { return v->getType()->isVectorTy(); }
  llvm::Value *broadcast(llvm::Value *v);
  // Brings two operands to the same shape (scalar or vector).
  void unify(llvm::Value *&a, llvm::Value *&c);

  /// A constant zero of `elem` that a load no enabled lane uses may read instead.
  llvm::Value *masked_off_element(llvm::Type *elem);
  llvm::AllocaInst *entry_alloca(llvm::Type *t, uint64_t count, uint64_t align);

  // ---- expressions ----------------------------------------------------------------------
  // A bfloat16 operation's float32 result is rounded to bfloat16 at once, as the
  // interpreter rounds it (a load's value is one already).
  llvm::Value *gen(const Expr &e) {
    llvm::Value *v = visit_expr(e);
    if (e.dtype() == DType::kBFloat16 && !e.as<LoadNode>()) v = bfloat16_bits_to_float(float_to_bfloat16_bits(v));
    return v;
  }

  llvm::Value *visit(const IntImmNode *op, const Expr &) override;
  llvm::Value *visit(const FloatImmNode *op, const Expr &) override;
  llvm::Value *visit(const VarNode *op, const Expr &) override;

  llvm::Value *arith(ExprKind kind, const Expr &ea, const Expr &ec, DType t);
  llvm::Value *visit(const AddNode *op, const Expr &) override;
  llvm::Value *visit(const SubNode *op, const Expr &) override;
  llvm::Value *visit(const MulNode *op, const Expr &) override;
  llvm::Value *visit(const DivNode *op, const Expr &) override;
  llvm::Value *visit(const MinNode *op, const Expr &) override;
  llvm::Value *visit(const MaxNode *op, const Expr &) override;

  // Floor division/modulo from truncating ones: adjust when the remainder's sign
  // differs from the divisor's.
  void floor_divmod(const Expr &ea, const Expr &ec, llvm::Value **q_out, llvm::Value **r_out);
  llvm::Value *visit(const FloorDivNode *op, const Expr &) override;
  llvm::Value *visit(const FloorModNode *op, const Expr &) override;

  llvm::Value *compare(ExprKind kind, const Expr &ea, const Expr &ec);
  llvm::Value *visit(const EQNode *op, const Expr &) override { return compare(ExprKind::kEQ, op->a, op->b); }
  llvm::Value *visit(const NENode *op, const Expr &) override { return compare(ExprKind::kNE, op->a, op->b); }
  llvm::Value *visit(const LTNode *op, const Expr &) override { return compare(ExprKind::kLT, op->a, op->b); }
  llvm::Value *visit(const LENode *op, const Expr &) override { return compare(ExprKind::kLE, op->a, op->b); }
  llvm::Value *visit(const GTNode *op, const Expr &) override { return compare(ExprKind::kGT, op->a, op->b); }
  llvm::Value *visit(const GENode *op, const Expr &) override { return compare(ExprKind::kGE, op->a, op->b); }
  llvm::Value *visit(const AndNode *op, const Expr &) override;
  llvm::Value *visit(const OrNode *op, const Expr &) override;
  llvm::Value *visit(const NotNode *op, const Expr &) override { return b_.CreateNot(gen(op->a)); }

  llvm::Value *visit(const SelectNode *op, const Expr &) override;

  llvm::Value *visit(const CastNode *op, const Expr &) override;

  llvm::Value *intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value *> args);
  // libm call applied lane by lane for vectors.
  llvm::Value *libm(const char *name, llvm::Value *x);
  // The largest power of two (up to 2^20) known to divide the integer `e`: unrolled
  // loops' variables are constants here.
  int64_t power_of_two_dividing(const Expr &e);
  // The alignment of a GPU thread's scalar access at `flat` in `buf`: what the index
  // proves, up to 16 bytes, so that LLVM's load/store vectorizer can merge neighbouring
  // accesses into ld/st.v2 and .v4 (it raises no alignment but an alloca's).
  llvm::Align gpu_align(const Expr &flat, const Buffer &buf);
  // The GPU's approximate log2(x) * scale and 2^x (PTX lg2.approx / ex2.approx, about
  // 2 ulp): there is no libm on the device.
  llvm::Value *gpu_log2(llvm::Value *x, double scale);
  llvm::Value *gpu_exp2(llvm::Value *x);
  llvm::Value *visit(const CallNode *op, const Expr &) override;

  // Row-major flat index of an access (IR), simplified with the ranges in scope.
  Expr flat_index(const Buffer &buf, const std::vector<Expr> &indices);

  // How much the index `flat` grows when `var` (the variable `var_expr` names) steps by
  // 1, where that is a constant.
  std::optional<int64_t> index_step(const Expr &flat, const VarNode *var, const Expr &var_expr);

  enum class Pattern { kScalar, kContiguous, kStrided, kGather };
  // Strides up to this are loaded as one contiguous span and shuffled (a stride-2
  // convolution's input); wider ones waste more than a gather costs.
  static constexpr int64_t kMaxShuffledStride = 4;
  // How an index varies across the lanes of the vectorized loop; `stride` receives the
  // constant step between lanes for kStrided.
  Pattern classify(const Expr &flat, int64_t *stride = nullptr);

  /// `e` evaluated as a scalar, inside a vector loop too (an invariant address).
  llvm::Value *gen_scalar(const Expr &e);
  /// The index `flat` at lane 0 of the vector loop.
  llvm::Value *lane0(const Expr &flat);

  // flat_index and classify of one load or store, memoized: an unrolled table emits the
  // same accesses once per position under the same ranges, and simplifying their
  // indices again each time was most of such a build.
  struct Access {
    Expr flat;
    Pattern pattern;
    int64_t stride = 0;
    // The access itself, kept alive so that its address names it for the whole build.
    Expr load;
    Stmt store;
  };
  const Access &access_of(const Expr &load, const Stmt &store, const Buffer &buf, const std::vector<Expr> &indices);
  struct AccessKey {
    const void *node;
    const VarNode *vec_var;
    int lanes;
    uint64_t ranges;
    bool operator==(const AccessKey &o) const {
      return node == o.node && vec_var == o.vec_var && lanes == o.lanes && ranges == o.ranges;
    }
  };
  struct AccessKeyHash {
    size_t operator()(const AccessKey &k) const {
      return std::hash<const void *>()(k.node) ^ (std::hash<const void *>()(k.vec_var) << 1) ^
             (static_cast<size_t>(k.lanes) << 7) ^ static_cast<size_t>(k.ranges);
    }
  };
  std::unordered_map<AccessKey, Access, AccessKeyHash> accesses_;

  // `maybe_outside`: the address is only used under a mask and may lie outside the
  // buffer (a padded convolution's masked-off lanes); an inbounds GEP there would be
  // poison and let LLVM assume the mask's condition away.
  llvm::Value *element_ptr(const Buffer &buf, llvm::Value *flat, bool maybe_outside = false);

  // LLVM 16's x86 AVX2 lowering of a masked load with a lane count that is not a power
  // of two (a 9-lane row of a padded 7x7 convolution) returned wrong values: the load
  // is widened here to the next power of two, the extra lanes masked off, and cut back.
  // The load itself carries the buffer's alias scopes: without them LLVM cannot keep an
  // accumulator in registers across it (a 7-lane padded row ran 3x slower).
  llvm::Value *masked_load(llvm::FixedVectorType *vt, llvm::Value *ptr, llvm::Align align, llvm::Value *mask,
                           const Buffer &buf);

  // The lanes of an unmasked strided load from whole vectors of `lanes_` elements, the
  // last one ending at the last lane's element, so nothing beyond the span the scalar
  // loop reads is touched. LLVM legalizes one odd-sized span load (<15 x float> for 8
  // lanes of stride 2) element by element with inserts; whole vectors and one shuffle
  // become two loads and two shuffles on AVX2.
  llvm::Value *strided_vector_load(const Buffer &buf, llvm::Value *first, int64_t stride, llvm::Align align);

  llvm::Value *visit(const LoadNode *op, const Expr &) override;

  llvm::Value *visit(const ReduceNode *, const Expr &) override;

  // ---- statements -----------------------------------------------------------------------
  void visit(const SeqNode *op, const Stmt &) override;

  void visit(const StoreNode *op, const Stmt &) override;

  void visit(const IfThenElseNode *op, const Stmt &) override;

  void visit(const BarrierNode *op, const Stmt &) override;

  // Warp shuffles, and shared memory across the warps of a group (emit_cuda.cc).
  void visit(const ThreadAllReduceNode *op, const Stmt &) override;

  void visit(const BlockNode *op, const Stmt &) override;

  // Frees this function's workspaces allocated after the first `keep`, newest first.
  void free_workspaces(size_t keep);

  // Returns `code` from the function being generated when it is not 0 (a workspace
  // that could not be allocated, a failed parallel task), freeing what it holds first.
  void return_if_failed(llvm::Value *code);

  // Emits `for (v = begin; v < end; ++v) body` with optional loop metadata.
  void emit_loop(const ForNode *op, llvm::Value *begin, llvm::Value *end, llvm::MDNode *hint);

  // A parameter buffer that a serial loop reads in order (a packed weight panel under
  // the reduction loop).
  struct Stream {
    Buffer buffer;
    Expr flat;  // the first element read in an iteration, in the loop's variable
  };
  // The streams of loop `op`'s body (block bindings substituted; `inner`: the loops
  // between `op` and the statement).
  void find_streams(const Stmt &s, const VarMap &bindings, std::vector<std::pair<Var, int64_t>> inner,
                    const ForNode *op, std::vector<Stream> *out);
  // Inside a parallel loop's task: prefetches into L2 what the thread's next task reads
  // of each stream of `op` (its variable bound), spread over the iterations.
  void prefetch_next_task(const ForNode *op);
  std::vector<const ForNode *> loop_stack_;        ///< the loops emit_loop is inside, outermost first
  std::unordered_set<const BufferNode *> params_;  ///< of the function being generated

  llvm::MDNode *loop_hint(const char *name, llvm::Metadata *value = nullptr);
  /// The hint of a serial loop: none, or the vectorizer kept off a large body.
  llvm::MDNode *serial_loop_hint(const ForNode *op);

  // A vectorized loop is emitted as one vector iteration when its body is straight-line
  // blocks and stores whose predicates do not depend on the lane.
  bool can_vectorize(const ForNode *op);

  // Iterations of the innermost statements under `s` (loops multiply, sequences add).
  static int64_t trip_count(const Stmt &s);

  void visit(const ForNode *op, const Stmt &self) override;

  void emit_for(const ForNode *op, const Stmt &self);

  void unroll_explicitly(const ForNode *op);

  // Whether `s` loads or stores a local (per-thread) buffer.
  static bool accesses_local_buffer(const Stmt &s);

  void emit_vector(const ForNode *op);

  // Outlines the loop body into a task function run on the runtime's thread pool; the
  // closure passes every variable and buffer pointer in scope.
  void emit_parallel(const ForNode *op);

  llvm::LLVMContext &ctx_;
  llvm::Module &mod_;
  llvm::IRBuilder<> b_;
  const Target &target_;
  llvm::Function *fn_ = nullptr;
  std::unordered_map<const VarNode *, llvm::Value *> vars_;
  std::unordered_map<const BufferNode *, llvm::Value *> buffers_;
  std::vector<llvm::Value *> masks_;
  std::vector<llvm::Value *> live_workspaces_;  ///< of the function being generated, oldest first
  std::unordered_map<const BufferNode *, llvm::MDNode *> alias_scope_, noalias_;
  Analyzer analyzer_;
  int lanes_ = 1;
  int64_t auto_unroll_ = 0;
  const VarNode *vec_var_ = nullptr;
  bool gpu_ = false;  // emitting an NVPTX kernel
  // The kernel's threadIdx variables and block shape (emit_kernel).
  std::array<const VarNode *, 3> gpu_thread_index_ = {nullptr, nullptr, nullptr};
  std::array<int64_t, 3> gpu_block_ = {1, 1, 1};
  llvm::Value *thread_index_value(int axis);
  // threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y
  llvm::Value *linear_thread_index();
  Expr vec_var_expr_;
};

}  // namespace kiln::codegen::detail
