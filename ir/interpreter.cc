#include "ir/interpreter.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

#include "ir/functor.h"

namespace kiln::ir {
namespace {

// A float outside int64 (or NaN) has no integer value; converting it would be undefined
// behaviour, so it saturates (NaN to 0). Casts of such values are unspecified in Kiln.
int64_t float_to_int64(double x) {
  if (std::isnan(x)) return 0;
  if (x >= 9.2233720368547758e18) return INT64_MAX;
  if (x <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(std::trunc(x));
}

}  // namespace

namespace {

// Integers travel as int64, floats as double rounded to their dtype after every
// operation, so float32 programs see float32 rounding as compiled code does.
struct Scalar {
  int64_t i = 0;
  double f = 0;
};

double round_to(DType t, double v) {
  if (t == DType::kFloat32) return static_cast<float>(v);
  if (t == DType::kFloat16) return half_to_float(float_to_half(static_cast<float>(v)));
  if (t == DType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
  return v;
}

int64_t wrap_to(DType t, int64_t v) {
  switch (t) {
    case DType::kInt8:
      return static_cast<int8_t>(v);
    case DType::kInt32:
      return static_cast<int32_t>(v);
    case DType::kBool:
      return v != 0;
    default:
      return v;
  }
}

int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

class Interpreter : public ExprFunctor<Scalar>, public StmtFunctor<void> {
 public:
  std::unordered_map<const VarNode *, int64_t> env;
  std::unordered_map<const BufferNode *, HostTensor *> buffers;
  std::vector<const BlockNode *> block_stack;
  /// GPU execution: shared buffers are allocated once per thread block by the caller.
  bool shared_preallocated = false;

  Scalar eval(const Expr &e) { return visit_expr(e); }
  bool eval_bool(const Expr &e) { return eval(e).i != 0; }

 protected:
  static Scalar I(int64_t v) { return Scalar{v, 0}; }
  static Scalar F(double v) { return Scalar{0, v}; }

  [[noreturn]] void fail(const std::string &what) {
    std::ostringstream os;
    os << what;
    if (!block_stack.empty()) os << " in block '" << block_stack.back()->name << "'";
    throw IRError(os.str());
  }

  int64_t flat_index(const Buffer &b, const std::vector<Expr> &indices) {
    int64_t flat = 0;
    for (size_t d = 0; d < indices.size(); ++d) {
      int64_t v = eval(indices[d]).i;
      if (v < 0 || v >= b->shape[d]) {
        std::ostringstream os;
        os << "out-of-bounds access " << b->name << "[";
        for (size_t k = 0; k < indices.size(); ++k) os << (k ? ", " : "") << eval(indices[k]).i;
        os << "] (shape [";
        for (size_t k = 0; k < b->shape.size(); ++k) os << (k ? ", " : "") << b->shape[k];
        os << "])";
        fail(os.str());
      }
      flat = flat * b->shape[d] + v;
    }
    return flat;
  }

 public:
  HostTensor *storage_of(const Buffer &b) { return storage(b); }

 protected:
  HostTensor *storage(const Buffer &b) {
    auto it = buffers.find(b.get());
    if (it == buffers.end()) fail("buffer '" + b->name + "' is used outside the scope that allocates it");
    return it->second;
  }

  Scalar visit(const IntImmNode *op, const Expr &) override { return I(op->value); }
  Scalar visit(const FloatImmNode *op, const Expr &) override { return F(round_to(op->dtype, op->value)); }
  Scalar visit(const VarNode *op, const Expr &) override {
    auto it = env.find(op);
    if (it == env.end()) fail("variable '" + op->name + "' is used outside its loop or block");
    return I(it->second);
  }

  template <typename IntOp, typename FloatOp>
  Scalar arith(const Expr &a, const Expr &b, DType t, IntOp iop, FloatOp fop) {
    Scalar x = eval(a), y = eval(b);
    if (is_float(t)) return F(round_to(t, fop(x.f, y.f)));
    return I(wrap_to(t, iop(x.i, y.i)));
  }
  template <typename IntOp, typename FloatOp>
  Scalar compare(const Expr &a, const Expr &b, IntOp iop, FloatOp fop) {
    Scalar x = eval(a), y = eval(b);
    return I(is_float(a.dtype()) ? fop(x.f, y.f) : iop(x.i, y.i));
  }

  Scalar visit(const AddNode *op, const Expr &) override {
    return arith(
        op->a, op->b, op->dtype, [](int64_t x, int64_t y) { return x + y; }, [](double x, double y) { return x + y; });
  }
  Scalar visit(const SubNode *op, const Expr &) override {
    return arith(
        op->a, op->b, op->dtype, [](int64_t x, int64_t y) { return x - y; }, [](double x, double y) { return x - y; });
  }
  Scalar visit(const MulNode *op, const Expr &) override {
    return arith(
        op->a, op->b, op->dtype, [](int64_t x, int64_t y) { return x * y; }, [](double x, double y) { return x * y; });
  }
  Scalar visit(const DivNode *op, const Expr &) override {
    return arith(
        op->a, op->b, op->dtype, [](int64_t x, int64_t y) { return y ? x / y : 0; },
        [](double x, double y) { return x / y; });
  }
  Scalar visit(const FloorDivNode *op, const Expr &) override {
    Scalar x = eval(op->a), y = eval(op->b);
    if (y.i == 0) fail("division by zero");
    return I(wrap_to(op->dtype, floordiv_i(x.i, y.i)));
  }
  Scalar visit(const FloorModNode *op, const Expr &) override {
    Scalar x = eval(op->a), y = eval(op->b);
    if (y.i == 0) fail("modulo by zero");
    return I(wrap_to(op->dtype, x.i - floordiv_i(x.i, y.i) * y.i));
  }
  Scalar visit(const MinNode *op, const Expr &) override {
    return arith(
        op->a, op->b, op->dtype, [](int64_t x, int64_t y) { return std::min(x, y); },
        [](double x, double y) { return x < y ? x : y; });
  }
  Scalar visit(const MaxNode *op, const Expr &) override {
    return arith(
        op->a, op->b, op->dtype, [](int64_t x, int64_t y) { return std::max(x, y); },
        [](double x, double y) { return x > y ? x : y; });
  }
  Scalar visit(const EQNode *op, const Expr &) override {
    return compare(op->a, op->b, std::equal_to<int64_t>(), std::equal_to<double>());
  }
  Scalar visit(const NENode *op, const Expr &) override {
    return compare(op->a, op->b, std::not_equal_to<int64_t>(), std::not_equal_to<double>());
  }
  Scalar visit(const LTNode *op, const Expr &) override {
    return compare(op->a, op->b, std::less<int64_t>(), std::less<double>());
  }
  Scalar visit(const LENode *op, const Expr &) override {
    return compare(op->a, op->b, std::less_equal<int64_t>(), std::less_equal<double>());
  }
  Scalar visit(const GTNode *op, const Expr &) override {
    return compare(op->a, op->b, std::greater<int64_t>(), std::greater<double>());
  }
  Scalar visit(const GENode *op, const Expr &) override {
    return compare(op->a, op->b, std::greater_equal<int64_t>(), std::greater_equal<double>());
  }
  Scalar visit(const AndNode *op, const Expr &) override { return I(eval_bool(op->a) && eval_bool(op->b)); }
  Scalar visit(const OrNode *op, const Expr &) override { return I(eval_bool(op->a) || eval_bool(op->b)); }
  Scalar visit(const NotNode *op, const Expr &) override { return I(!eval_bool(op->a)); }
  Scalar visit(const SelectNode *op, const Expr &) override {
    // Only the chosen side is evaluated: padding selects guard out-of-bounds loads.
    return eval_bool(op->cond) ? eval(op->true_value) : eval(op->false_value);
  }
  Scalar visit(const CastNode *op, const Expr &) override {
    Scalar v = eval(op->value);
    bool from_float = is_float(op->value.dtype());
    if (is_float(op->dtype)) return F(round_to(op->dtype, from_float ? v.f : static_cast<double>(v.i)));
    if (op->dtype == DType::kBool) return I(from_float ? v.f != 0 : v.i != 0);
    return I(wrap_to(op->dtype, from_float ? float_to_int64(v.f) : v.i));
  }
  Scalar visit(const CallNode *op, const Expr &) override {
    Scalar a = eval(op->args[0]);
    double x = a.f, r = 0;
    switch (op->op) {
      case Intrinsic::kExp:
        r = std::exp(x);
        break;
      case Intrinsic::kLog:
        r = std::log(x);
        break;
      case Intrinsic::kTanh:
        r = std::tanh(x);
        break;
      case Intrinsic::kErf:
        r = std::erf(x);
        break;
      case Intrinsic::kSqrt:
        r = std::sqrt(x);
        break;
      case Intrinsic::kRsqrt:
        r = 1.0 / std::sqrt(x);
        break;
      case Intrinsic::kPow:
        r = std::pow(x, eval(op->args[1]).f);
        break;
      case Intrinsic::kAbs:
        if (!is_float(op->dtype)) return I(std::llabs(a.i));
        r = std::fabs(x);
        break;
      case Intrinsic::kSigmoid:
        r = 1.0 / (1.0 + std::exp(-x));
        break;
      case Intrinsic::kFloor:
        r = std::floor(x);
        break;
      case Intrinsic::kCeil:
        r = std::ceil(x);
        break;
    }
    return F(round_to(op->dtype, r));
  }
  Scalar visit(const LoadNode *op, const Expr &) override {
    HostTensor *t = storage(op->buffer);
    double v = t->get(flat_index(op->buffer, op->indices));
    return is_float(op->dtype) ? F(v) : I(static_cast<int64_t>(v));
  }
  Scalar visit(const ReduceNode *, const Expr &) override {
    fail("a tensor-level reduction reached the interpreter; lower the compute first");
  }

  void visit(const ForNode *op, const Stmt &) override {
    const VarNode *v = op->loop_var.get();
    for (int64_t i = 0; i < op->extent; ++i) {
      env[v] = i;
      visit_stmt(op->body);
    }
    env.erase(v);
  }
  void visit(const SeqNode *op, const Stmt &) override {
    for (const Stmt &s : op->stmts) visit_stmt(s);
  }
  void visit(const BlockNode *op, const Stmt &) override {
    block_stack.push_back(op);
    if (eval_bool(op->predicate)) {
      bool first_reduce_step = true;
      std::vector<int64_t> values;
      for (size_t k = 0; k < op->iter_vars.size(); ++k) values.push_back(eval(op->iter_values[k]).i);
      for (size_t k = 0; k < op->iter_vars.size(); ++k) {
        const IterVar &iv = op->iter_vars[k];
        if (values[k] < 0 || values[k] >= iv.extent)
          fail("iterator '" + iv.var.name() + "' bound to " + std::to_string(values[k]) + ", outside [0, " +
               std::to_string(iv.extent) + ")");
        env[iv.var.get()] = values[k];
        if (iv.kind == IterKind::kReduce && values[k] != 0) first_reduce_step = false;
      }
      std::vector<HostTensor> owned;
      owned.reserve(op->alloc_buffers.size());
      for (const Buffer &b : op->alloc_buffers) {
        if (shared_preallocated && b->scope == MemoryScope::kShared) continue;
        owned.emplace_back(b->dtype, b->shape);
        // Poison fresh storage so a schedule that reads what it never wrote is caught.
        owned.back().fill(is_float(b->dtype) ? std::numeric_limits<double>::quiet_NaN() : -123456789.0);
        buffers[b.get()] = &owned.back();
      }
      if (op->init.defined() && first_reduce_step) visit_stmt(op->init);
      visit_stmt(op->body);
      for (const Buffer &b : op->alloc_buffers)
        if (!shared_preallocated || b->scope != MemoryScope::kShared) buffers.erase(b.get());
      for (const IterVar &iv : op->iter_vars) env.erase(iv.var.get());
    }
    block_stack.pop_back();
  }
  void visit(const StoreNode *op, const Stmt &) override {
    HostTensor *t = storage(op->buffer);
    int64_t idx = flat_index(op->buffer, op->indices);
    Scalar v = eval(op->value);
    t->set(idx, is_float(op->buffer->dtype) ? v.f : static_cast<double>(v.i));
  }
  void visit(const BarrierNode *, const Stmt &) override {}
  void visit(const ThreadAllReduceNode *op, const Stmt &) override {
    fail("the cross-thread reduction of '" + op->value->name + "' runs only in a GPU kernel (interpret_gpu)");
  }
  void visit(const IfThenElseNode *op, const Stmt &) override {
    if (eval_bool(op->cond)) {
      visit_stmt(op->then_case);
    } else if (op->else_case.defined()) {
      visit_stmt(op->else_case);
    }
  }
};

// Runs one thread block of a kernel: every thread has its own interpreter (its indices,
// loop variables and local buffers); statements without a barrier run thread after
// thread, and a barrier ends a phase only when every thread has reached it. Control
// flow around a barrier must be the same in all threads: it is checked.
class BlockRunner {
 public:
  BlockRunner(const GpuKernel &k, const std::unordered_map<const BufferNode *, HostTensor *> &globals,
              const std::array<int64_t, 3> &block_id)
      : kernel_(k), threads_(static_cast<size_t>(k.threads_per_block())) {
    for (const Buffer &b : k.shared) {
      shared_.emplace_back(b->dtype, b->shape);
      shared_.back().fill(is_float(b->dtype) ? std::numeric_limits<double>::quiet_NaN() : -123456789.0);
    }
    for (size_t t = 0; t < threads_.size(); ++t) {
      Interpreter &in = threads_[t];
      in.buffers = globals;
      in.shared_preallocated = true;
      for (size_t i = 0; i < k.shared.size(); ++i) in.buffers[k.shared[i].get()] = &shared_[i];
      int64_t rest = static_cast<int64_t>(t);
      for (int a = 0; a < 3; ++a) {
        in.env[k.block_index[a].get()] = block_id[a];
        in.env[k.thread_index[a].get()] = rest % k.block[a];
        rest /= k.block[a];
      }
    }
  }

  void run(const Stmt &s) {
    if (!s.defined()) return;
    if (!has_barrier(s)) {
      for (Interpreter &t : threads_) t.visit_stmt(s);
      return;
    }
    if (const auto *q = s.as<SeqNode>()) {
      for (const Stmt &c : q->stmts) run(c);
    } else if (const auto *l = s.as<ForNode>()) {
      for (int64_t i = 0; i < l->extent; ++i) {
        for (Interpreter &t : threads_) t.env[l->loop_var.get()] = i;
        run(l->body);
      }
      for (Interpreter &t : threads_) t.env.erase(l->loop_var.get());
    } else if (const auto *c = s.as<IfThenElseNode>()) {
      bool taken = uniform(c->cond, "the condition of an if around a barrier");
      run(taken ? c->then_case : c->else_case);
    } else if (const auto *b = s.as<BlockNode>()) {
      run_block(b);
    } else if (const auto *r = s.as<ThreadAllReduceNode>()) {
      all_reduce(r);
    }
  }

 private:
  bool has_barrier(const Stmt &s) {
    auto it = memo_.find(s.get());
    if (it != memo_.end()) return it->second;
    bool found = false;
    for_each_stmt(s, [&](const Stmt &x) {
      found = found || x.kind() == StmtKind::kBarrier || x.kind() == StmtKind::kThreadAllReduce;
    });
    memo_[s.get()] = found;
    return found;
  }

  bool uniform(const Expr &e, const char *what) {
    bool first = threads_[0].eval_bool(e);
    for (Interpreter &t : threads_)
      if (t.eval_bool(e) != first)
        throw IRError(std::string("threads of a block disagree on ") + what + " '" + to_string(e) +
                      "': some would wait at the barrier forever");
    return first;
  }

  // Every group of threads along the axis (the other indices equal) combines its
  // partials, in thread order, and each member receives the result.
  void all_reduce(const ThreadAllReduceNode *r) {
    std::map<std::vector<int64_t>, std::vector<Interpreter *>> groups;
    for (Interpreter &t : threads_) {
      std::vector<int64_t> key;
      for (int a = 0; a < 3; ++a)
        if (a != r->axis) key.push_back(t.env.at(kernel_.thread_index[a].get()));
      groups[key].push_back(&t);
    }
    const DType t = r->value->dtype;
    for (auto &[key, members] : groups) {
      double acc = 0;
      for (size_t i = 0; i < members.size(); ++i) {
        double v = members[i]->storage_of(r->value)->get(0);
        if (i == 0) {
          acc = v;
        } else if (r->combiner == Combiner::kSum) {
          acc = is_float(t) ? round_to(t, acc + v) : static_cast<double>(wrap_to(t, static_cast<int64_t>(acc + v)));
        } else if (r->combiner == Combiner::kMax) {
          acc = v > acc ? v : acc;
        } else {
          acc = v < acc ? v : acc;
        }
      }
      for (Interpreter *t : members) t->storage_of(r->value)->set(0, acc);
    }
  }

  void run_block(const BlockNode *b) {
    if (b->init.defined()) throw IRError("block '" + b->name + "' around a barrier has a reduction init");
    if (!uniform(b->predicate, "the predicate of a block around a barrier")) return;
    std::vector<std::vector<HostTensor>> owned(threads_.size());
    for (size_t t = 0; t < threads_.size(); ++t) {
      Interpreter &in = threads_[t];
      for (size_t k = 0; k < b->iter_vars.size(); ++k) in.env[b->iter_vars[k].var.get()] = in.eval(b->iter_values[k]).i;
      owned[t].reserve(b->alloc_buffers.size());
      for (const Buffer &buf : b->alloc_buffers) {
        if (buf->scope == MemoryScope::kShared) continue;
        owned[t].emplace_back(buf->dtype, buf->shape);
        owned[t].back().fill(is_float(buf->dtype) ? std::numeric_limits<double>::quiet_NaN() : -123456789.0);
        in.buffers[buf.get()] = &owned[t].back();
      }
    }
    run(b->body);
    for (Interpreter &in : threads_) {
      for (const Buffer &buf : b->alloc_buffers)
        if (buf->scope != MemoryScope::kShared) in.buffers.erase(buf.get());
      for (const IterVar &iv : b->iter_vars) in.env.erase(iv.var.get());
    }
  }

  const GpuKernel &kernel_;
  std::vector<Interpreter> threads_;
  std::vector<HostTensor> shared_;
  std::unordered_map<const StmtNode *, bool> memo_;
};

void bind_params(const std::string &name, const std::vector<Buffer> &params, const std::vector<HostTensor *> &args,
                 std::unordered_map<const BufferNode *, HostTensor *> *buffers) {
  if (args.size() != params.size())
    throw IRError("function '" + name + "' takes " + std::to_string(params.size()) + " tensors, got " +
                  std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer &p = params[i];
    if (args[i]->dtype() != p->dtype || args[i]->shape() != p->shape)
      throw IRError("argument " + std::to_string(i) + " does not match parameter '" + p->name + "' (" +
                    dtype_name(p->dtype) + ")");
    (*buffers)[p.get()] = args[i];
  }
}

}  // namespace

void interpret(const PrimFunc &func, const std::vector<HostTensor *> &args) {
  Interpreter interp;
  bind_params(func.name, func.params, args, &interp.buffers);
  interp.visit_stmt(func.body);
}

void interpret_gpu(const GpuProgram &program, const std::vector<HostTensor *> &args) {
  std::unordered_map<const BufferNode *, HostTensor *> globals;
  bind_params(program.name, program.params, args, &globals);
  std::vector<HostTensor> scratch;
  scratch.reserve(program.global_scratch.size());
  for (const Buffer &b : program.global_scratch) {
    scratch.emplace_back(b->dtype, b->shape);
    scratch.back().fill(is_float(b->dtype) ? std::numeric_limits<double>::quiet_NaN() : -123456789.0);
    globals[b.get()] = &scratch.back();
  }
  for (const GpuKernel &k : program.kernels) {
    for (int64_t z = 0; z < k.grid[2]; ++z)
      for (int64_t y = 0; y < k.grid[1]; ++y)
        for (int64_t x = 0; x < k.grid[0]; ++x) BlockRunner(k, globals, {x, y, z}).run(k.body);
  }
}

std::vector<HostTensor> interpret(const PrimFunc &func, const std::vector<HostTensor> &inputs) {
  std::vector<HostTensor> all(inputs.begin(), inputs.end());
  for (size_t i = inputs.size(); i < func.params.size(); ++i) all.push_back(HostTensor::like(func.params[i]));
  std::vector<HostTensor *> ptrs;
  for (HostTensor &t : all) ptrs.push_back(&t);
  interpret(func, ptrs);
  return std::vector<HostTensor>(all.begin() + static_cast<long>(inputs.size()), all.end());
}

}  // namespace kiln::ir
