#include "ir/expr.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace kiln::ir {

Expr::Expr(int value) : Expr(make_int(value)) {}
Expr::Expr(int64_t value) : Expr(make_int(value)) {}
Expr::Expr(double value) : Expr(make_float(value)) {}

Var::Var(std::string name, DType dtype) : Expr(std::make_shared<VarNode>(dtype, std::move(name))) {}

const char *intrinsic_name(Intrinsic op) {
  switch (op) {
    case Intrinsic::kExp:
      return "exp";
    case Intrinsic::kLog:
      return "log";
    case Intrinsic::kTanh:
      return "tanh";
    case Intrinsic::kErf:
      return "erf";
    case Intrinsic::kSqrt:
      return "sqrt";
    case Intrinsic::kRsqrt:
      return "rsqrt";
    case Intrinsic::kPow:
      return "pow";
    case Intrinsic::kAbs:
      return "abs";
    case Intrinsic::kSigmoid:
      return "sigmoid";
    case Intrinsic::kFloor:
      return "floor";
    case Intrinsic::kCeil:
      return "ceil";
  }
  return "?";
}

int intrinsic_arity(Intrinsic op) { return op == Intrinsic::kPow ? 2 : 1; }

const char *scope_name(MemoryScope s) {
  switch (s) {
    case MemoryScope::kGlobal:
      return "global";
    case MemoryScope::kShared:
      return "shared";
    case MemoryScope::kLocal:
      return "local";
  }
  return "?";
}

const char *combiner_name(Combiner c) {
  switch (c) {
    case Combiner::kSum:
      return "sum";
    case Combiner::kMax:
      return "max";
    case Combiner::kMin:
      return "min";
  }
  return "?";
}

int64_t BufferNode::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Buffer make_buffer(std::string name, DType dtype, std::vector<int64_t> shape, MemoryScope scope) {
  // Element counts and byte sizes (num_elements() * 8 at most) must stay in int64.
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw IRError("buffer '" + name + "' has a non-positive dimension");
    if (__builtin_mul_overflow(elements, d, &elements) || elements > (INT64_MAX >> 4)) {
      // A shape from outside (a workload, a model): the caller's refusal, not a bug.
      throw std::invalid_argument("buffer '" + name +
                                  "' has more elements than a program can address (2^59); give a smaller shape");
    }
  }
  return std::make_shared<BufferNode>(std::move(name), dtype, std::move(shape), scope);
}

Expr make_int(int64_t value, DType t) {
  if (is_float(t)) return make_float(static_cast<double>(value), t);
  return Expr(std::make_shared<IntImmNode>(t, value));
}

Expr make_float(double value, DType t) {
  if (!is_float(t)) return make_int(static_cast<int64_t>(value), t);
  return Expr(std::make_shared<FloatImmNode>(t, value));
}

Expr make_const(DType t, double value) {
  if (is_float(t)) return make_float(value, t);
  if (t == DType::kBool) return make_int(value != 0 ? 1 : 0, t);
  return make_int(static_cast<int64_t>(value), t);
}

bool as_const_int(const Expr &e, int64_t *value) {
  if (const auto *imm = e.as<IntImmNode>()) {
    *value = imm->value;
    return true;
  }
  return false;
}

bool is_const_int(const Expr &e, int64_t value) {
  int64_t v = 0;
  return as_const_int(e, &v) && v == value;
}

// Immediates adopt the other operand's type so that `x + 1` works for any x.
static bool is_imm(const Expr &e) { return e.kind() == ExprKind::kIntImm || e.kind() == ExprKind::kFloatImm; }

static Expr retype_imm(const Expr &imm, DType t) {
  if (const auto *i = imm.as<IntImmNode>()) return make_const(t, static_cast<double>(i->value));
  const auto *f = imm.as<FloatImmNode>();
  if (!is_float(t)) throw IRError("float constant used where an integer is expected");
  return make_float(f->value, t);
}

static void unify_types(const char *op, Expr &a, Expr &b) {
  if (!a.defined() || !b.defined()) throw IRError(std::string("undefined operand of ") + op);
  if (a.dtype() == b.dtype()) return;
  if (is_imm(b)) {
    b = retype_imm(b, a.dtype());
    return;
  }
  if (is_imm(a)) {
    a = retype_imm(a, b.dtype());
    return;
  }
  throw IRError(std::string("operand types of ") + op + " differ: " + dtype_name(a.dtype()) + " vs " +
                dtype_name(b.dtype()));
}

static int64_t floordiv_int(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

template <ExprKind K>
static Expr make_bin(const char *op, Expr a, Expr b, bool result_bool) {
  unify_types(op, a, b);
  DType t = result_bool ? DType::kBool : a.dtype();
  return Expr(std::make_shared<BinaryNode<K>>(t, std::move(a), std::move(b)));
}

Expr make_add(Expr a, Expr b) {
  int64_t x, y;
  if (as_const_int(a, &x) && as_const_int(b, &y) && a.dtype() == b.dtype()) return make_int(x + y, a.dtype());
  return make_bin<ExprKind::kAdd>("+", std::move(a), std::move(b), false);
}
Expr make_sub(Expr a, Expr b) {
  int64_t x, y;
  if (as_const_int(a, &x) && as_const_int(b, &y) && a.dtype() == b.dtype()) return make_int(x - y, a.dtype());
  return make_bin<ExprKind::kSub>("-", std::move(a), std::move(b), false);
}
Expr make_mul(Expr a, Expr b) {
  int64_t x, y;
  if (as_const_int(a, &x) && as_const_int(b, &y) && a.dtype() == b.dtype()) return make_int(x * y, a.dtype());
  return make_bin<ExprKind::kMul>("*", std::move(a), std::move(b), false);
}
Expr make_div(Expr a, Expr b) {
  Expr r = make_bin<ExprKind::kDiv>("/", std::move(a), std::move(b), false);
  if (!is_float(r.dtype())) throw IRError("'/' is float division; use floordiv for integers");
  return r;
}
Expr make_floordiv(Expr a, Expr b) {
  int64_t x, y;
  if (as_const_int(a, &x) && as_const_int(b, &y) && y != 0 && a.dtype() == b.dtype())
    return make_int(floordiv_int(x, y), a.dtype());
  Expr r = make_bin<ExprKind::kFloorDiv>("floordiv", std::move(a), std::move(b), false);
  if (is_float(r.dtype())) throw IRError("floordiv takes integer operands");
  return r;
}
Expr make_floormod(Expr a, Expr b) {
  int64_t x, y;
  if (as_const_int(a, &x) && as_const_int(b, &y) && y != 0 && a.dtype() == b.dtype())
    return make_int(x - floordiv_int(x, y) * y, a.dtype());
  Expr r = make_bin<ExprKind::kFloorMod>("floormod", std::move(a), std::move(b), false);
  if (is_float(r.dtype())) throw IRError("floormod takes integer operands");
  return r;
}
Expr make_min(Expr a, Expr b) { return make_bin<ExprKind::kMin>("min", std::move(a), std::move(b), false); }
Expr make_max(Expr a, Expr b) { return make_bin<ExprKind::kMax>("max", std::move(a), std::move(b), false); }

Expr make_cmp(ExprKind kind, Expr a, Expr b) {
  switch (kind) {
    case ExprKind::kEQ:
      return make_bin<ExprKind::kEQ>("==", std::move(a), std::move(b), true);
    case ExprKind::kNE:
      return make_bin<ExprKind::kNE>("!=", std::move(a), std::move(b), true);
    case ExprKind::kLT:
      return make_bin<ExprKind::kLT>("<", std::move(a), std::move(b), true);
    case ExprKind::kLE:
      return make_bin<ExprKind::kLE>("<=", std::move(a), std::move(b), true);
    case ExprKind::kGT:
      return make_bin<ExprKind::kGT>(">", std::move(a), std::move(b), true);
    case ExprKind::kGE:
      return make_bin<ExprKind::kGE>(">=", std::move(a), std::move(b), true);
    default:
      throw IRError("make_cmp: not a comparison kind");
  }
}

static void require_bool(const char *op, const Expr &e) {
  if (e.dtype() != DType::kBool) throw IRError(std::string(op) + " takes boolean operands");
}
Expr make_and(Expr a, Expr b) {
  require_bool("&&", a);
  require_bool("&&", b);
  if (is_const_int(a, 1)) return b;
  if (is_const_int(b, 1)) return a;
  return make_bin<ExprKind::kAnd>("&&", std::move(a), std::move(b), true);
}
Expr make_or(Expr a, Expr b) {
  require_bool("||", a);
  require_bool("||", b);
  return make_bin<ExprKind::kOr>("||", std::move(a), std::move(b), true);
}
Expr make_not(Expr a) {
  require_bool("!", a);
  return Expr(std::make_shared<NotNode>(std::move(a)));
}
Expr make_select(Expr cond, Expr t, Expr f) {
  require_bool("select condition", cond);
  unify_types("select", t, f);
  return Expr(std::make_shared<SelectNode>(std::move(cond), std::move(t), std::move(f)));
}
Expr make_cast(DType t, Expr v) {
  if (v.dtype() == t) return v;
  if (const auto *i = v.as<IntImmNode>()) return make_const(t, static_cast<double>(i->value));
  return Expr(std::make_shared<CastNode>(t, std::move(v)));
}
Expr make_call(Intrinsic op, std::vector<Expr> args) {
  if (static_cast<int>(args.size()) != intrinsic_arity(op))
    throw IRError(std::string(intrinsic_name(op)) + " takes " + std::to_string(intrinsic_arity(op)) + " argument(s)");
  if (op == Intrinsic::kPow) unify_types("pow", args[0], args[1]);
  DType t = args[0].dtype();
  if (op != Intrinsic::kAbs && !is_float(t))
    throw IRError(std::string(intrinsic_name(op)) + " takes floating-point arguments");
  return Expr(std::make_shared<CallNode>(t, op, std::move(args)));
}
Expr make_load(Buffer buffer, std::vector<Expr> indices) {
  if (indices.size() != buffer->shape.size()) {
    std::ostringstream os;
    os << "load of '" << buffer->name << "' has " << indices.size() << " indices for a " << buffer->shape.size()
       << "-d buffer";
    throw IRError(os.str());
  }
  for (Expr &i : indices) {
    if (is_float(i.dtype())) throw IRError("buffer index of '" + buffer->name + "' is not an integer");
    i = make_cast(DType::kInt64, i);
  }
  return Expr(std::make_shared<LoadNode>(std::move(buffer), std::move(indices)));
}
Expr make_reduce(Combiner c, Expr source, std::vector<IterVar> axes) {
  for (const IterVar &iv : axes) {
    if (iv.kind != IterKind::kReduce) throw IRError("reduce axis '" + iv.var.name() + "' is not a reduce iterator");
  }
  return Expr(std::make_shared<ReduceNode>(c, std::move(source), std::move(axes)));
}

Expr make_binary(ExprKind kind, Expr a, Expr b) {
  switch (kind) {
    case ExprKind::kAdd:
      return make_add(std::move(a), std::move(b));
    case ExprKind::kSub:
      return make_sub(std::move(a), std::move(b));
    case ExprKind::kMul:
      return make_mul(std::move(a), std::move(b));
    case ExprKind::kDiv:
      return make_div(std::move(a), std::move(b));
    case ExprKind::kFloorDiv:
      return make_floordiv(std::move(a), std::move(b));
    case ExprKind::kFloorMod:
      return make_floormod(std::move(a), std::move(b));
    case ExprKind::kMin:
      return make_min(std::move(a), std::move(b));
    case ExprKind::kMax:
      return make_max(std::move(a), std::move(b));
    case ExprKind::kAnd:
      return make_and(std::move(a), std::move(b));
    case ExprKind::kOr:
      return make_or(std::move(a), std::move(b));
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return make_cmp(kind, std::move(a), std::move(b));
    default:
      throw IRError("make_binary: not a binary kind");
  }
}

Expr combiner_identity(Combiner c, DType t) {
  switch (c) {
    case Combiner::kSum:
      return make_const(t, 0);
    case Combiner::kMax:
      if (is_float(t)) return make_float(-std::numeric_limits<double>::infinity(), t);
      return make_int(t == DType::kInt8    ? -128
                      : t == DType::kInt32 ? std::numeric_limits<int32_t>::min()
                                           : std::numeric_limits<int64_t>::min(),
                      t);
    case Combiner::kMin:
      if (is_float(t)) return make_float(std::numeric_limits<double>::infinity(), t);
      return make_int(t == DType::kInt8    ? 127
                      : t == DType::kInt32 ? std::numeric_limits<int32_t>::max()
                                           : std::numeric_limits<int64_t>::max(),
                      t);
  }
  return Expr();
}

Expr combine(Combiner c, Expr acc, Expr value) {
  switch (c) {
    case Combiner::kSum:
      return make_add(std::move(acc), std::move(value));
    case Combiner::kMax:
      return make_max(std::move(acc), std::move(value));
    case Combiner::kMin:
      return make_min(std::move(acc), std::move(value));
  }
  return Expr();
}

Expr operator+(Expr a, Expr b) { return make_add(std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return make_sub(std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return make_mul(std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return make_div(std::move(a), std::move(b)); }
Expr operator<(Expr a, Expr b) { return make_cmp(ExprKind::kLT, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return make_cmp(ExprKind::kLE, std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return make_cmp(ExprKind::kGT, std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return make_cmp(ExprKind::kGE, std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return make_and(std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return make_or(std::move(a), std::move(b)); }
Expr operator!(Expr a) { return make_not(std::move(a)); }
Expr eq(Expr a, Expr b) { return make_cmp(ExprKind::kEQ, std::move(a), std::move(b)); }
Expr ne(Expr a, Expr b) { return make_cmp(ExprKind::kNE, std::move(a), std::move(b)); }

}  // namespace kiln::ir
