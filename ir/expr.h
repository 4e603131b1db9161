// Expressions: small immutable reference-counted nodes.
//
// Semantics (the contract every pass, the interpreter and codegen share):
// - Index arithmetic is int64 and never overflows for the shapes Kiln handles.
// - FloorDiv/FloorMod round toward negative infinity (Python semantics); the divisor of
//   index arithmetic is positive by construction. Div is true division and only exists
//   for floating-point operands.
// - Float arithmetic follows IEEE single precision; codegen may contract a*b+c to FMA.
// - Float min(a, b) is (a < b ? a : b) and max(a, b) is (a > b ? a : b): with a NaN
//   operand the result is b, which is what one SIMD min/max instruction computes.
// - Select evaluates only the chosen operand, so its other operand may hold a load that
//   would be out of bounds (padding, concatenation).
// - Comparisons and logical operators produce kBool.
// - Reduce appears only in tensor compute definitions (te.h), never in loop programs.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln::ir {

// Every expression node, listed once; the list generates the kind enum and the
// functor dispatch.
#define KILN_EXPR_NODES(X) \
  X(IntImm)                \
  X(FloatImm)              \
  X(Var)                   \
  X(Add)                   \
  X(Sub)                   \
  X(Mul)                   \
  X(Div)                   \
  X(FloorDiv)              \
  X(FloorMod)              \
  X(Min)                   \
  X(Max)                   \
  X(EQ)                    \
  X(NE)                    \
  X(LT)                    \
  X(LE)                    \
  X(GT)                    \
  X(GE)                    \
  X(And)                   \
  X(Or)                    \
  X(Not)                   \
  X(Select)                \
  X(Cast)                  \
  X(Call)                  \
  X(Load)                  \
  X(Reduce)

enum class ExprKind : uint8_t {
#define KILN_ENUM(N) k##N,
  KILN_EXPR_NODES(KILN_ENUM)
#undef KILN_ENUM
};

struct ExprNode {
  ExprNode(ExprKind kind, DType dtype) : kind(kind), dtype(dtype) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType dtype;
};

/// Handle to an immutable expression node. Copying shares the node.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  /// Integer literals become int64 index constants; float literals float32 constants.
  Expr(int value);      // NOLINT(google-explicit-constructor)
  Expr(int64_t value);  // NOLINT(google-explicit-constructor)
  Expr(double value);   // NOLINT(google-explicit-constructor)

  bool defined() const { return node_ != nullptr; }
  const ExprNode *get() const { return node_.get(); }
  const ExprNode *operator->() const { return node_.get(); }
  ExprKind kind() const { return node_->kind; }
  DType dtype() const { return node_->dtype; }
  bool same_as(const Expr &other) const { return node_ == other.node_; }
  template <typename T>
  const T *as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T *>(node_.get()) : nullptr;
  }
  const std::shared_ptr<const ExprNode> &node() const { return node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

template <ExprKind K>
struct ExprNodeOf : ExprNode {
  static constexpr ExprKind kKind = K;
  explicit ExprNodeOf(DType dtype) : ExprNode(K, dtype) {}
};

struct IntImmNode : ExprNodeOf<ExprKind::kIntImm> {
  IntImmNode(DType t, int64_t v) : ExprNodeOf(t), value(v) {}
  const int64_t value;
};

struct FloatImmNode : ExprNodeOf<ExprKind::kFloatImm> {
  FloatImmNode(DType t, double v) : ExprNodeOf(t), value(v) {}
  const double value;
};

/// A variable; identity is the node itself, the name is only for printing.
struct VarNode : ExprNodeOf<ExprKind::kVar> {
  VarNode(DType t, std::string n) : ExprNodeOf(t), name(std::move(n)) {}
  const std::string name;
};

/// Typed handle for variables (loop variables, block iterators, TE axes).
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(std::string name, DType dtype = DType::kInt64);
  explicit Var(std::shared_ptr<const ExprNode> node) : Expr(std::move(node)) {}
  const VarNode *get() const { return static_cast<const VarNode *>(Expr::get()); }
  const VarNode *operator->() const { return get(); }
  const std::string &name() const { return get()->name; }
};

template <ExprKind K>
struct BinaryNode : ExprNodeOf<K> {
  BinaryNode(DType t, Expr a, Expr b) : ExprNodeOf<K>(t), a(std::move(a)), b(std::move(b)) {}
  const Expr a, b;
};
using AddNode = BinaryNode<ExprKind::kAdd>;
using SubNode = BinaryNode<ExprKind::kSub>;
using MulNode = BinaryNode<ExprKind::kMul>;
using DivNode = BinaryNode<ExprKind::kDiv>;
using FloorDivNode = BinaryNode<ExprKind::kFloorDiv>;
using FloorModNode = BinaryNode<ExprKind::kFloorMod>;
using MinNode = BinaryNode<ExprKind::kMin>;
using MaxNode = BinaryNode<ExprKind::kMax>;
using EQNode = BinaryNode<ExprKind::kEQ>;
using NENode = BinaryNode<ExprKind::kNE>;
using LTNode = BinaryNode<ExprKind::kLT>;
using LENode = BinaryNode<ExprKind::kLE>;
using GTNode = BinaryNode<ExprKind::kGT>;
using GENode = BinaryNode<ExprKind::kGE>;
using AndNode = BinaryNode<ExprKind::kAnd>;
using OrNode = BinaryNode<ExprKind::kOr>;

struct NotNode : ExprNodeOf<ExprKind::kNot> {
  explicit NotNode(Expr a) : ExprNodeOf(DType::kBool), a(std::move(a)) {}
  const Expr a;
};

struct SelectNode : ExprNodeOf<ExprKind::kSelect> {
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNodeOf(t.dtype()), cond(std::move(c)), true_value(std::move(t)), false_value(std::move(f)) {}
  const Expr cond, true_value, false_value;
};

struct CastNode : ExprNodeOf<ExprKind::kCast> {
  CastNode(DType t, Expr v) : ExprNodeOf(t), value(std::move(v)) {}
  const Expr value;
};

/// Math intrinsics. All take and return floats except abs (any numeric type).
enum class Intrinsic : uint8_t { kExp, kLog, kTanh, kErf, kSqrt, kRsqrt, kPow, kAbs, kSigmoid, kFloor, kCeil };
const char *intrinsic_name(Intrinsic op);
int intrinsic_arity(Intrinsic op);

struct CallNode : ExprNodeOf<ExprKind::kCall> {
  CallNode(DType t, Intrinsic op, std::vector<Expr> args) : ExprNodeOf(t), op(op), args(std::move(args)) {}
  const Intrinsic op;
  const std::vector<Expr> args;
};

enum class MemoryScope : uint8_t { kGlobal, kShared, kLocal };
const char *scope_name(MemoryScope s);

/// A dense row-major buffer with a constant shape.
struct BufferNode {
  BufferNode(std::string n, DType t, std::vector<int64_t> s, MemoryScope sc)
      : name(std::move(n)), dtype(t), shape(std::move(s)), scope(sc) {}
  const std::string name;
  const DType dtype;
  const std::vector<int64_t> shape;
  const MemoryScope scope;
  int64_t num_elements() const;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, DType dtype, std::vector<int64_t> shape, MemoryScope scope = MemoryScope::kGlobal);

struct LoadNode : ExprNodeOf<ExprKind::kLoad> {
  LoadNode(Buffer b, std::vector<Expr> i) : ExprNodeOf(b->dtype), buffer(std::move(b)), indices(std::move(i)) {}
  const Buffer buffer;
  const std::vector<Expr> indices;
};

/// Iteration kinds of block iterators and TE axes.
enum class IterKind : uint8_t { kSpatial, kReduce };

/// An iterator with domain [0, extent).
struct IterVar {
  Var var;
  int64_t extent = 0;
  IterKind kind = IterKind::kSpatial;
};

enum class Combiner : uint8_t { kSum, kMax, kMin };
const char *combiner_name(Combiner c);
/// The identity element of a combiner for a dtype (0, -inf/lowest, +inf/highest).
Expr combiner_identity(Combiner c, DType t);
/// combine(acc, value) for the combiner.
Expr combine(Combiner c, Expr acc, Expr value);

struct ReduceNode : ExprNodeOf<ExprKind::kReduce> {
  ReduceNode(Combiner c, Expr s, std::vector<IterVar> a)
      : ExprNodeOf(s.dtype()), combiner(c), source(std::move(s)), axes(std::move(a)) {}
  const Combiner combiner;
  const Expr source;
  const std::vector<IterVar> axes;
};

// ---- factories: the only way nodes are built; they check operand types ----------------
Expr make_int(int64_t value, DType t = DType::kInt64);
Expr make_float(double value, DType t = DType::kFloat32);
Expr make_const(DType t, double value);
Expr make_add(Expr a, Expr b);
Expr make_sub(Expr a, Expr b);
Expr make_mul(Expr a, Expr b);
Expr make_div(Expr a, Expr b);
Expr make_floordiv(Expr a, Expr b);
Expr make_floormod(Expr a, Expr b);
Expr make_min(Expr a, Expr b);
Expr make_max(Expr a, Expr b);
Expr make_cmp(ExprKind kind, Expr a, Expr b);
Expr make_and(Expr a, Expr b);
Expr make_or(Expr a, Expr b);
Expr make_not(Expr a);
Expr make_select(Expr cond, Expr t, Expr f);
Expr make_cast(DType t, Expr v);
Expr make_call(Intrinsic op, std::vector<Expr> args);
Expr make_load(Buffer buffer, std::vector<Expr> indices);
Expr make_reduce(Combiner c, Expr source, std::vector<IterVar> axes);
/// Rebuilds a binary node of the given kind (used by mutators).
Expr make_binary(ExprKind kind, Expr a, Expr b);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);  // float division
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);

/// Returns the constant value if `e` is an integer immediate.
bool as_const_int(const Expr &e, int64_t *value);
bool is_const_int(const Expr &e, int64_t value);

/// Thrown when IR is built in a way that violates its contract (a Kiln bug or a misuse
/// of the C++ API); user-facing errors have their own types.
struct IRError : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace kiln::ir
