#include "codegen/lower_llvm.h"

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "codegen/codegen.h"
#include "codegen/llvm_emitter.h"
#include "codegen/runtime/abi.h"
#include "codegen/vector_math.h"
#include "ir/annotations.h"
#include "ir/lower_passes.h"

namespace kiln::codegen {
namespace detail {

bool contains_load(const Expr &e) {
  bool found = false;
  for_each_subexpr(e, [&](const Expr &x) { found = found || x.kind() == ExprKind::kLoad; });
  return found;
}

void CodeGen::emit_function(const PrimFunc &func, const char *entry_symbol) {
  make_alias_scopes(func);
  llvm::Type *ptr = b_.getPtrTy();
  // The kernel body takes noalias, 64-byte-aligned buffer pointers.
  std::vector<llvm::Type *> param_types(func.params.size(), ptr);
  auto *impl_ty = llvm::FunctionType::get(b_.getInt32Ty(), param_types, false);
  llvm::Function *impl =
      llvm::Function::Create(impl_ty, llvm::Function::InternalLinkage, std::string(entry_symbol) + "_impl", mod_);
  for (size_t i = 0; i < func.params.size(); ++i) {
    impl->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
    impl->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
    impl->getArg(static_cast<unsigned>(i))->setName(func.params[i]->name);
    buffers_[func.params[i].get()] = impl->getArg(static_cast<unsigned>(i));
    params_.insert(func.params[i].get());
  }
  impl->addFnAttr(llvm::Attribute::NoUnwind);
  add_cpu_attrs(impl);
  fn_ = impl;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", impl));
  visit_stmt(func.body);
  b_.CreateRet(b_.getInt32(0));

  // entry(void **args) unpacks the argument array.
  auto *entry_ty = llvm::FunctionType::get(b_.getInt32Ty(), {ptr}, false);
  llvm::Function *entry = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, entry_symbol, mod_);
  add_cpu_attrs(entry);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
  std::vector<llvm::Value *> args;
  for (size_t i = 0; i < func.params.size(); ++i) {
    llvm::Value *slot = b_.CreateConstGEP1_64(ptr, entry->getArg(0), i);
    args.push_back(b_.CreateAlignedLoad(ptr, slot, llvm::Align(8)));
  }
  b_.CreateRet(b_.CreateCall(impl, args));
}

void CodeGen::make_alias_scopes(const PrimFunc &func) {
  std::vector<const BufferNode *> all;
  for (const Buffer &p : func.params) all.push_back(p.get());
  for_each_stmt(func.body, [&](const Stmt &s) {
    if (const auto *b = s.as<BlockNode>())
      for (const Buffer &a : b->alloc_buffers) all.push_back(a.get());
  });
  llvm::MDBuilder md(ctx_);
  llvm::MDNode *domain = md.createAnonymousAliasScopeDomain("kiln.buffers");
  std::vector<llvm::Metadata *> scopes;
  for (const BufferNode *b : all) {
    llvm::MDNode *scope = md.createAnonymousAliasScope(domain, b->name);
    scopes.push_back(scope);
    alias_scope_[b] = llvm::MDNode::get(ctx_, {scope});
  }
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<llvm::Metadata *> others;
    for (size_t j = 0; j < all.size(); ++j)
      if (j != i) others.push_back(scopes[j]);
    noalias_[all[i]] = llvm::MDNode::get(ctx_, others);
  }
}

llvm::Value *CodeGen::tag(llvm::Value *v, const Buffer &buf) {
  if (auto *inst = llvm::dyn_cast<llvm::Instruction>(v)) {
    auto it = alias_scope_.find(buf.get());
    if (it != alias_scope_.end()) {
      inst->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second);
      inst->setMetadata(llvm::LLVMContext::MD_noalias, noalias_[buf.get()]);
    }
  }
  return v;
}

llvm::Type *CodeGen::scalar_type(DType t) {
  switch (t) {
    case DType::kBool:
      return b_.getInt1Ty();
    case DType::kInt8:
      return b_.getInt8Ty();
    case DType::kInt32:
      return b_.getInt32Ty();
    case DType::kInt64:
      return b_.getInt64Ty();
    case DType::kFloat16:
      return b_.getHalfTy();
    case DType::kFloat32:
    case DType::kBFloat16:  // held in float32 registers; storage_type is its 16 bits
      return b_.getFloatTy();
  }
  return nullptr;
}

namespace {

// `elem`, or a vector of `elem` with as many lanes as `v` has.
llvm::Type *shaped_like(llvm::Type *elem, llvm::Value *v) {
  if (auto *vector = llvm::dyn_cast<llvm::FixedVectorType>(v->getType()))
    return llvm::FixedVectorType::get(elem, vector->getNumElements());
  return elem;
}

}  // namespace

llvm::Value *CodeGen::bfloat16_bits_to_float(llvm::Value *bits) {
  auto like = [&](llvm::Type *elem) { return shaped_like(elem, bits); };
  llvm::Value *wide = b_.CreateShl(b_.CreateZExt(bits, like(b_.getInt32Ty())), 16);
  return b_.CreateBitCast(wide, like(b_.getFloatTy()));
}

llvm::Value *CodeGen::float_to_bfloat16_bits(llvm::Value *f) {
  auto like = [&](llvm::Type *elem) { return shaped_like(elem, f); };
  llvm::Type *i32 = like(b_.getInt32Ty());
  auto constant = [&](uint32_t x) { return llvm::ConstantInt::get(i32, x); };
  llvm::Value *bits = b_.CreateBitCast(f, i32);
  llvm::Value *odd = b_.CreateAnd(b_.CreateLShr(bits, 16), constant(1));
  llvm::Value *rounded = b_.CreateAdd(bits, b_.CreateAdd(odd, constant(0x7fff)));
  llvm::Value *quiet_nan = b_.CreateOr(bits, constant(0x400000));
  llvm::Value *chosen = b_.CreateSelect(b_.CreateFCmpUNO(f, f), quiet_nan, rounded);
  return b_.CreateTrunc(b_.CreateLShr(chosen, 16), like(b_.getInt16Ty()));
}

llvm::Type *CodeGen::value_type(DType t) {
  llvm::Type *s = scalar_type(t);
  return lanes_ > 1 ? llvm::FixedVectorType::get(s, static_cast<unsigned>(lanes_)) : s;
}

void CodeGen::add_cpu_attrs(llvm::Function *f) {
  f->addFnAttr(llvm::Attribute::NoUnwind);
  // LLVM's x86 tuning prefers 256-bit vectors on AVX-512 parts and would split our
  // explicit 512-bit operations; the kernels are written for the full width.
  if (target_.vector_width_bits >= 512) {
    f->addFnAttr("prefer-vector-width", "512");
    f->addFnAttr("min-legal-vector-width", "512");
  }
}

llvm::FunctionCallee CodeGen::runtime_fn(const char *name, llvm::Type *ret, std::vector<llvm::Type *> params) {
  return mod_.getOrInsertFunction(name, llvm::FunctionType::get(ret, params, false));
}

llvm::Value *CodeGen::broadcast(llvm::Value *v) {
  if (lanes_ == 1 || is_vec(v)) return v;
  return b_.CreateVectorSplat(static_cast<unsigned>(lanes_), v);
}

void CodeGen::unify(llvm::Value *&a, llvm::Value *&c) {
  if (is_vec(a) != is_vec(c)) {
    a = broadcast(a);
    c = broadcast(c);
  }
}

llvm::AllocaInst *CodeGen::entry_alloca(llvm::Type *t, uint64_t count, uint64_t align) {
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst *a = eb.CreateAlloca(t, eb.getInt64(count));
  a->setAlignment(llvm::Align(align));
  return a;
}

llvm::Value *CodeGen::visit(const IntImmNode *op, const Expr &) {
  return llvm::ConstantInt::get(scalar_type(op->dtype), static_cast<uint64_t>(op->value), /*isSigned=*/true);
}

llvm::Value *CodeGen::visit(const FloatImmNode *op, const Expr &) {
  return llvm::ConstantFP::get(scalar_type(op->dtype), op->value);
}

llvm::Value *CodeGen::visit(const VarNode *op, const Expr &) {
  auto it = vars_.find(op);
  if (it == vars_.end()) throw CodegenError("variable '" + op->name + "' is used outside its scope");
  return it->second;
}

llvm::Value *CodeGen::arith(ExprKind kind, const Expr &ea, const Expr &ec, DType t) {
  llvm::Value *a = gen(ea), *c = gen(ec);
  unify(a, c);
  bool fp = is_float(t);
  llvm::Value *r = nullptr;
  switch (kind) {
    case ExprKind::kAdd:
      r = fp ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
      break;
    case ExprKind::kSub:
      r = fp ? b_.CreateFSub(a, c) : b_.CreateSub(a, c);
      break;
    case ExprKind::kMul:
      r = fp ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
      break;
    case ExprKind::kDiv:
      r = b_.CreateFDiv(a, c);
      break;
    case ExprKind::kMin:
      r = fp ? b_.CreateSelect(b_.CreateFCmpOLT(a, c), a, c) : b_.CreateSelect(b_.CreateICmpSLT(a, c), a, c);
      break;
    case ExprKind::kMax:
      r = fp ? b_.CreateSelect(b_.CreateFCmpOGT(a, c), a, c) : b_.CreateSelect(b_.CreateICmpSGT(a, c), a, c);
      break;
    default:
      throw CodegenError("not an arithmetic node");
  }
  return r;
}

llvm::Value *CodeGen::visit(const AddNode *op, const Expr &) { return arith(ExprKind::kAdd, op->a, op->b, op->dtype); }

llvm::Value *CodeGen::visit(const SubNode *op, const Expr &) { return arith(ExprKind::kSub, op->a, op->b, op->dtype); }

llvm::Value *CodeGen::visit(const MulNode *op, const Expr &) { return arith(ExprKind::kMul, op->a, op->b, op->dtype); }

llvm::Value *CodeGen::visit(const DivNode *op, const Expr &) { return arith(ExprKind::kDiv, op->a, op->b, op->dtype); }

llvm::Value *CodeGen::visit(const MinNode *op, const Expr &) { return arith(ExprKind::kMin, op->a, op->b, op->dtype); }

llvm::Value *CodeGen::visit(const MaxNode *op, const Expr &) { return arith(ExprKind::kMax, op->a, op->b, op->dtype); }

void CodeGen::floor_divmod(const Expr &ea, const Expr &ec, llvm::Value **q_out, llvm::Value **r_out) {
  llvm::Value *a = gen(ea), *c = gen(ec);
  unify(a, c);
  llvm::Value *q = b_.CreateSDiv(a, c), *r = b_.CreateSRem(a, c);
  llvm::Value *zero = llvm::Constant::getNullValue(r->getType());
  llvm::Value *adjust =
      b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(c, zero)));
  llvm::Value *one = llvm::ConstantInt::get(q->getType(), 1);
  *q_out = b_.CreateSelect(adjust, b_.CreateSub(q, one), q);
  *r_out = b_.CreateSelect(adjust, b_.CreateAdd(r, c), r);
}

llvm::Value *CodeGen::visit(const FloorDivNode *op, const Expr &) {
  int64_t c;
  // Non-negative dividends (the usual index case) need no adjustment.
  if (as_const_int(op->b, &c) && c > 0 && analyzer_.bounds(op->a).min >= 0) {
    llvm::Value *a = gen(op->a);
    return b_.CreateUDiv(a, llvm::ConstantInt::get(a->getType(), static_cast<uint64_t>(c)));
  }
  llvm::Value *q, *r;
  floor_divmod(op->a, op->b, &q, &r);
  return q;
}

llvm::Value *CodeGen::visit(const FloorModNode *op, const Expr &) {
  int64_t c;
  if (as_const_int(op->b, &c) && c > 0 && analyzer_.bounds(op->a).min >= 0) {
    llvm::Value *a = gen(op->a);
    return b_.CreateURem(a, llvm::ConstantInt::get(a->getType(), static_cast<uint64_t>(c)));
  }
  llvm::Value *q, *r;
  floor_divmod(op->a, op->b, &q, &r);
  return r;
}

llvm::Value *CodeGen::compare(ExprKind kind, const Expr &ea, const Expr &ec) {
  llvm::Value *a = gen(ea), *c = gen(ec);
  unify(a, c);
  bool fp = is_float(ea.dtype());
  switch (kind) {
    case ExprKind::kEQ:
      return fp ? b_.CreateFCmpOEQ(a, c) : b_.CreateICmpEQ(a, c);
    case ExprKind::kNE:
      return fp ? b_.CreateFCmpUNE(a, c) : b_.CreateICmpNE(a, c);
    case ExprKind::kLT:
      return fp ? b_.CreateFCmpOLT(a, c) : b_.CreateICmpSLT(a, c);
    case ExprKind::kLE:
      return fp ? b_.CreateFCmpOLE(a, c) : b_.CreateICmpSLE(a, c);
    case ExprKind::kGT:
      return fp ? b_.CreateFCmpOGT(a, c) : b_.CreateICmpSGT(a, c);
    case ExprKind::kGE:
      return fp ? b_.CreateFCmpOGE(a, c) : b_.CreateICmpSGE(a, c);
    default:
      throw CodegenError("not a comparison");
  }
}

llvm::Value *CodeGen::visit(const AndNode *op, const Expr &) {
  llvm::Value *a = gen(op->a), *c = gen(op->b);
  unify(a, c);
  return b_.CreateAnd(a, c);
}

llvm::Value *CodeGen::visit(const OrNode *op, const Expr &) {
  llvm::Value *a = gen(op->a), *c = gen(op->b);
  unify(a, c);
  return b_.CreateOr(a, c);
}

llvm::Value *CodeGen::visit(const SelectNode *op, const Expr &) {
  llvm::Value *cond = gen(op->cond);
  // A condition on unrolled positions (a table written out as selects) is a constant:
  // only its side is emitted, not every row of the table for LLVM to delete.
  if (const auto *known = llvm::dyn_cast<llvm::ConstantInt>(cond))
    return gen(known->isZero() ? op->false_value : op->true_value);
  bool guarded = contains_load(op->true_value) || contains_load(op->false_value);
  if (!guarded) {
    llvm::Value *t = gen(op->true_value), *f = gen(op->false_value);
    unify(t, f);
    if (is_vec(cond)) {
      t = broadcast(t);
      f = broadcast(f);
    }
    if (is_vec(t) && !is_vec(cond)) cond = broadcast(cond);
    return b_.CreateSelect(cond, t, f);
  }
  if (is_vec(cond)) {
    // Vector lanes take both sides: loads under each side are masked, within the
    // lanes an enclosing select already enabled.
    llvm::Value *outer = masks_.empty() ? nullptr : masks_.back();
    masks_.push_back(outer ? b_.CreateAnd(outer, cond) : cond);
    llvm::Value *t = gen(op->true_value);
    llvm::Value *not_cond = b_.CreateNot(cond);
    masks_.back() = outer ? b_.CreateAnd(outer, not_cond) : not_cond;
    llvm::Value *f = gen(op->false_value);
    masks_.pop_back();
    t = broadcast(t);
    f = broadcast(f);
    return b_.CreateSelect(cond, t, f);
  }
  // Scalar: only the chosen side may run its loads.
  llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(ctx_, "sel.t", fn_);
  llvm::BasicBlock *else_bb = llvm::BasicBlock::Create(ctx_, "sel.f", fn_);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx_, "sel.join", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  llvm::Value *t = gen(op->true_value);
  llvm::BasicBlock *then_end = b_.GetInsertBlock();
  b_.SetInsertPoint(else_bb);
  llvm::Value *f = gen(op->false_value);
  llvm::BasicBlock *else_end = b_.GetInsertBlock();
  if (is_vec(t) != is_vec(f)) {
    // Broadcast inside the branch that produced the scalar.
    if (!is_vec(t)) {
      b_.SetInsertPoint(then_end);
      t = broadcast(t);
    } else {
      b_.SetInsertPoint(else_end);
      f = broadcast(f);
    }
  }
  b_.SetInsertPoint(then_end);
  b_.CreateBr(join);
  b_.SetInsertPoint(else_end);
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
  llvm::PHINode *phi = b_.CreatePHI(t->getType(), 2);
  phi->addIncoming(t, then_end);
  phi->addIncoming(f, else_end);
  return phi;
}

llvm::Value *CodeGen::visit(const CastNode *op, const Expr &) {
  llvm::Value *v = gen(op->value);
  DType from = op->value.dtype(), to = op->dtype;
  llvm::Type *dst = scalar_type(to);
  if (is_vec(v)) dst = llvm::FixedVectorType::get(dst, static_cast<unsigned>(lanes_));
  if (to == DType::kBool) {
    llvm::Value *zero = llvm::Constant::getNullValue(v->getType());
    return is_float(from) ? b_.CreateFCmpUNE(v, zero) : b_.CreateICmpNE(v, zero);
  }
  if (is_float(from) && is_float(to)) return b_.CreateFPCast(v, dst);
  if (is_float(from)) return b_.CreateFPToSI(v, dst);
  if (is_float(to)) return from == DType::kBool ? b_.CreateUIToFP(v, dst) : b_.CreateSIToFP(v, dst);
  if (from == DType::kBool) return b_.CreateZExt(v, dst);
  return b_.CreateSExtOrTrunc(v, dst);
}

llvm::Value *CodeGen::intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value *> args) {
  return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
}

llvm::Value *CodeGen::libm(const char *name, llvm::Value *x) {
  if (gpu_) throw CodegenError(std::string("CUDA code generation has no ") + name + " (float16); compute in float32");
  llvm::Type *f32 = b_.getFloatTy();
  llvm::FunctionCallee fn = mod_.getOrInsertFunction(name, llvm::FunctionType::get(f32, {f32}, false));
  auto call1 = [&](llvm::Value *s) {
    llvm::Value *in = s->getType() == f32 ? s : b_.CreateFPCast(s, f32);
    llvm::Value *r = b_.CreateCall(fn, {in});
    return s->getType() == f32 ? r : b_.CreateFPCast(r, s->getType());
  };
  if (!is_vec(x)) return call1(x);
  llvm::Value *out = llvm::UndefValue::get(x->getType());
  for (int i = 0; i < lanes_; ++i)
    out = b_.CreateInsertElement(out, call1(b_.CreateExtractElement(x, static_cast<uint64_t>(i))),
                                 static_cast<uint64_t>(i));
  return out;
}

llvm::Value *CodeGen::visit(const CallNode *op, const Expr &) {
  llvm::Value *x = gen(op->args[0]);
  auto one = [&](llvm::Value *like) { return llvm::ConstantFP::get(like->getType(), 1.0); };
  // float32 exp, erf and tanh are polynomials in the vector registers (vector_math.h):
  // LLVM would otherwise call libm once per lane.
  bool f32 = x->getType()->getScalarType()->isFloatTy();
  switch (op->op) {
    case Intrinsic::kExp:
      return f32 ? emit_exp_f32(b_, x) : intrinsic(llvm::Intrinsic::exp, {x});
    case Intrinsic::kLog:
      if (gpu_) return gpu_log2(x, std::log(2.0));
      return intrinsic(llvm::Intrinsic::log, {x});
    case Intrinsic::kSqrt:
      return intrinsic(llvm::Intrinsic::sqrt, {x});
    case Intrinsic::kRsqrt:
      return b_.CreateFDiv(one(x), intrinsic(llvm::Intrinsic::sqrt, {x}));
    case Intrinsic::kFloor:
      return intrinsic(llvm::Intrinsic::floor, {x});
    case Intrinsic::kCeil:
      return intrinsic(llvm::Intrinsic::ceil, {x});
    case Intrinsic::kTanh:
      return f32 ? emit_tanh_f32(b_, x) : libm("tanhf", x);
    case Intrinsic::kErf:
      return f32 ? emit_erf_f32(b_, x) : libm("erff", x);
    case Intrinsic::kSigmoid: {
      llvm::Value *neg = b_.CreateFNeg(x);
      llvm::Value *e = f32 ? emit_exp_f32(b_, neg) : intrinsic(llvm::Intrinsic::exp, {neg});
      return b_.CreateFDiv(one(x), b_.CreateFAdd(one(x), e));
    }
    case Intrinsic::kPow: {
      llvm::Value *y = gen(op->args[1]);
      unify(x, y);
      if (gpu_) return gpu_exp2(b_.CreateFMul(y, gpu_log2(x, 1.0)));
      return intrinsic(llvm::Intrinsic::pow, {x, y});
    }
    case Intrinsic::kAbs:
      if (is_float(op->dtype)) return intrinsic(llvm::Intrinsic::fabs, {x});
      return b_.CreateIntrinsic(llvm::Intrinsic::abs, {x->getType()}, {x, b_.getFalse()});
  }
  throw CodegenError("unknown intrinsic");
}

llvm::Value *CodeGen::visit(const ReduceNode *, const Expr &) {
  throw CodegenError("a tensor-level reduction reached code generation; lower the compute first");
}

void CodeGen::visit(const SeqNode *op, const Stmt &) {
  for (const Stmt &s : op->stmts) visit_stmt(s);
}

void CodeGen::visit(const BarrierNode *, const Stmt &) {
  if (!gpu_) throw CodegenError("a GPU barrier reached code generation for the CPU target " + target_.str());
  b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::nvvm_barrier0));
}

void CodeGen::visit(const IfThenElseNode *op, const Stmt &) {
  llvm::Value *cond = gen(op->cond);
  if (is_vec(cond)) throw CodegenError("a vectorized loop reached a lane-dependent branch");
  llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
  llvm::BasicBlock *end_bb = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
  llvm::BasicBlock *else_bb = op->else_case.defined() ? llvm::BasicBlock::Create(ctx_, "if.else", fn_) : end_bb;
  b_.CreateCondBr(cond, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  visit_stmt(op->then_case);
  b_.CreateBr(end_bb);
  if (op->else_case.defined()) {
    b_.SetInsertPoint(else_bb);
    visit_stmt(op->else_case);
    b_.CreateBr(end_bb);
  }
  b_.SetInsertPoint(end_bb);
}

void CodeGen::visit(const BlockNode *op, const Stmt &) {
  // Allocations of this block: small ones on the stack of the enclosing function (one
  // per task inside parallel loops), large ones in the workspace until the block ends.
  size_t workspaces_before = live_workspaces_.size();
  for (const Buffer &buf : op->alloc_buffers) {
    int64_t bytes = buf->num_elements() * dtype_bytes(buf->dtype);
    if (gpu_) {
      // Shared buffers are placed once per kernel (emit_kernel); everything else the
      // GPU lowering left is the thread's own.
      if (buf->scope != MemoryScope::kShared)
        buffers_[buf.get()] = entry_alloca(storage_type(buf->dtype), static_cast<uint64_t>(buf->num_elements()), 16);
      continue;
    }
    if (bytes <= kMaxStackBytes && buf->scope != MemoryScope::kGlobal) {
      buffers_[buf.get()] = entry_alloca(storage_type(buf->dtype), static_cast<uint64_t>(buf->num_elements()), 64);
    } else {
      llvm::Value *p = b_.CreateCall(runtime_fn("kiln_rt_alloc_workspace", b_.getPtrTy(), {b_.getInt64Ty()}),
                                     {b_.getInt64(static_cast<uint64_t>(bytes))});
      return_if_failed(b_.CreateSelect(b_.CreateIsNull(p), b_.getInt32(KILN_ERR_OUT_OF_MEMORY), b_.getInt32(0)));
      buffers_[buf.get()] = p;
      live_workspaces_.push_back(p);
    }
  }
  // In a vector loop the bindings are substituted into the body, so each access's
  // index is a function of the loops and its lane pattern can be analyzed. In a GPU
  // kernel too: a thread's tile offsets then cancel in the simplifier, and its own
  // arrays are indexed by constants (registers, not local memory).
  Stmt block_body = op->body;
  if (lanes_ > 1 || gpu_) {
    VarMap bindings;
    for (size_t k = 0; k < op->iter_vars.size(); ++k) bindings[op->iter_vars[k].var.get()] = op->iter_values[k];
    block_body = substitute(op->body, bindings);
  }
  if (lanes_ == 1) {
    for (size_t k = 0; k < op->iter_vars.size(); ++k) {
      vars_[op->iter_vars[k].var.get()] = gen(op->iter_values[k]);
      analyzer_.bind(op->iter_vars[k].var, op->iter_vars[k].extent);
    }
  }
  auto body = [&] {
    if (op->init.defined()) {
      // Run the init when every reduction iterator is at 0 (decompose_reductions
      // removed this from all but mixed loops).
      llvm::Value *first = b_.getTrue();
      for (size_t k = 0; k < op->iter_vars.size(); ++k) {
        if (op->iter_vars[k].kind != IterKind::kReduce) continue;
        llvm::Value *v = vars_[op->iter_vars[k].var.get()];
        if (is_vec(v)) throw CodegenError("a vectorized loop drives a reduction init");
        first = b_.CreateAnd(first, b_.CreateICmpEQ(v, llvm::ConstantInt::get(v->getType(), 0)));
      }
      llvm::BasicBlock *init_bb = llvm::BasicBlock::Create(ctx_, "init", fn_);
      llvm::BasicBlock *cont = llvm::BasicBlock::Create(ctx_, "update", fn_);
      b_.CreateCondBr(first, init_bb, cont);
      b_.SetInsertPoint(init_bb);
      visit_stmt(op->init);
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
    visit_stmt(block_body);
  };
  // The predicate's terms that vary across the lanes of a vector loop (the partial
  // tile of a padded vector axis) mask the lanes' loads and stores; the others branch.
  Expr branch = make_int(1, DType::kBool), lane_mask = make_int(1, DType::kBool);
  std::vector<Expr> terms;
  conjuncts(op->predicate, &terms);
  for (const Expr &term : terms) {
    Expr &side = lanes_ > 1 && uses_var(term, vec_var_) ? lane_mask : branch;
    side = is_const_int(side, 1) ? term : make_and(side, term);
  }
  auto masked_body = [&] {
    if (is_const_int(lane_mask, 1)) return body();
    llvm::Value *outer = masks_.empty() ? nullptr : masks_.back();
    llvm::Value *lanes = gen(lane_mask);
    masks_.push_back(outer ? b_.CreateAnd(outer, lanes) : lanes);
    body();
    masks_.pop_back();
  };
  if (is_const_int(branch, 1)) {
    masked_body();
  } else {
    llvm::Value *cond = gen(branch);
    if (is_vec(cond)) throw CodegenError("a vectorized loop reached a lane-dependent predicate");
    llvm::BasicBlock *then_bb = llvm::BasicBlock::Create(ctx_, "block", fn_);
    llvm::BasicBlock *end_bb = llvm::BasicBlock::Create(ctx_, "block.end", fn_);
    b_.CreateCondBr(cond, then_bb, end_bb);
    b_.SetInsertPoint(then_bb);
    masked_body();
    b_.CreateBr(end_bb);
    b_.SetInsertPoint(end_bb);
  }
  free_workspaces(workspaces_before);
  live_workspaces_.resize(workspaces_before);
  for (const Buffer &buf : op->alloc_buffers)
    if (!gpu_ || buf->scope != MemoryScope::kShared) buffers_.erase(buf.get());
  if (lanes_ == 1) {
    for (const IterVar &iv : op->iter_vars) {
      vars_.erase(iv.var.get());
      analyzer_.unbind(iv.var);
    }
  }
}

void CodeGen::free_workspaces(size_t keep) {
  for (size_t i = live_workspaces_.size(); i > keep; --i)
    b_.CreateCall(runtime_fn("kiln_rt_free_workspace", b_.getVoidTy(), {b_.getPtrTy()}), {live_workspaces_[i - 1]});
}

void CodeGen::return_if_failed(llvm::Value *code) {
  llvm::BasicBlock *failed = llvm::BasicBlock::Create(ctx_, "failed", fn_);
  llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "ok", fn_);
  b_.CreateCondBr(b_.CreateICmpNE(code, b_.getInt32(0)), failed, ok,
                  llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20));
  b_.SetInsertPoint(failed);
  free_workspaces(0);
  b_.CreateRet(code);
  b_.SetInsertPoint(ok);
}

void CodeGen::emit_loop(const ForNode *op, llvm::Value *begin, llvm::Value *end, llvm::MDNode *hint) {
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  llvm::BasicBlock *header = llvm::BasicBlock::Create(ctx_, "for." + op->loop_var.name(), fn_);
  llvm::BasicBlock *body_bb = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  llvm::BasicBlock *exit_bb = llvm::BasicBlock::Create(ctx_, "for.end", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode *iv = b_.CreatePHI(b_.getInt64Ty(), 2, op->loop_var.name());
  iv->addIncoming(begin, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(iv, end), body_bb, exit_bb);
  b_.SetInsertPoint(body_bb);
  vars_[op->loop_var.get()] = iv;
  analyzer_.bind(op->loop_var, op->extent);
  loop_stack_.push_back(op);
  if (op->for_kind == ForKind::kSerial && lanes_ == 1 && !gpu_) prefetch_next_task(op);
  visit_stmt(op->body);
  loop_stack_.pop_back();
  analyzer_.unbind(op->loop_var);
  vars_.erase(op->loop_var.get());
  llvm::Value *next = b_.CreateAdd(iv, b_.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
  llvm::BranchInst *back = b_.CreateBr(header);
  if (hint) back->setMetadata(llvm::LLVMContext::MD_loop, hint);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit_bb);
}

void CodeGen::find_streams(const Stmt &s, const VarMap &bindings, std::vector<std::pair<Var, int64_t>> inner,
                           const ForNode *op, std::vector<Stream> *out) {
  if (!s.defined()) return;
  auto loads_in = [&](const Expr &e) {
    for_each_subexpr(e, [&](const Expr &x) {
      const auto *ld = x.as<LoadNode>();
      if (!ld || !params_.count(ld->buffer.get())) return;
      for (const Stream &known : *out)
        if (known.buffer.get() == ld->buffer.get()) return;
      std::vector<Expr> indices;
      for (const Expr &i : ld->indices) indices.push_back(substitute(i, bindings));
      Expr flat = flat_index(ld->buffer, indices);
      bool known_vars = true;
      for_each_subexpr(flat, [&](const Expr &v) {
        if (const auto *var = v.as<VarNode>())
          known_vars = known_vars && (var == op->loop_var.get() || vars_.count(var) ||
                                      std::any_of(inner.begin(), inner.end(),
                                                  [&](const auto &loop) { return loop.first.get() == var; }));
      });
      if (!known_vars || !uses_var(flat, op->loop_var.get())) return;
      // Each variable moves the index forward by a constant, or this is no stream.
      auto step_of = [&](const Var &var) -> std::optional<int64_t> {
        std::optional<int64_t> step = index_step(flat, var.get(), var);
        if (!step || *step < 0) return std::nullopt;
        return step;
      };
      std::optional<int64_t> stride = step_of(op->loop_var);
      if (!stride || *stride == 0) return;
      int64_t span = 1;  // elements from an iteration's first read to its last
      VarMap at_start;
      for (const auto &[var, extent] : inner) {
        if (!uses_var(flat, var.get())) continue;
        std::optional<int64_t> step = step_of(var);
        if (!step) return;
        span += (extent - 1) * *step;
        at_start[var.get()] = make_int(0);
      }
      // In order: each iteration reads a line or more, and not much more, past the last.
      const int64_t read_bytes = std::min(span, *stride) * dtype_bytes(ld->buffer->dtype);
      if (read_bytes < 64 || read_bytes > 1024) return;
      out->push_back({ld->buffer, analyzer_.simplify(substitute(flat, at_start))});
    });
  };
  if (const auto *f = s.as<ForNode>()) {
    inner.emplace_back(f->loop_var, f->extent);
    find_streams(f->body, bindings, inner, op, out);
  } else if (const auto *q = s.as<SeqNode>()) {
    for (const Stmt &x : q->stmts) find_streams(x, bindings, inner, op, out);
  } else if (const auto *b = s.as<BlockNode>()) {
    VarMap with_block = bindings;
    for (size_t k = 0; k < b->iter_vars.size(); ++k)
      with_block[b->iter_vars[k].var.get()] = substitute(b->iter_values[k], bindings);
    find_streams(b->body, with_block, inner, op, out);
  } else if (const auto *st = s.as<StoreNode>()) {
    loads_in(st->value);
  } else if (const auto *i = s.as<IfThenElseNode>()) {
    find_streams(i->then_case, bindings, inner, op, out);
    find_streams(i->else_case, bindings, inner, op, out);
  }
}

void CodeGen::prefetch_next_task(const ForNode *op) {
  // The task loop of the outlined task function around this loop: a thread runs
  // consecutive tasks (static chunks), so task t + 1 is its next.
  auto task_loop = std::find_if(loop_stack_.rbegin(), loop_stack_.rend(),
                                [](const ForNode *l) { return l->for_kind == ForKind::kParallel; });
  if (task_loop == loop_stack_.rend()) return;
  const Var &task = (*task_loop)->loop_var;
  // The loops from the task loop to this one: how many iterations each level has in all,
  // and the running count of them (`counter`, 0 at the task's start).
  int64_t above = 1, total = 1;
  VarMap next_task_start{{task.get(), make_add(task, make_int(1))}};
  Expr counter = make_int(0);
  for (auto l = task_loop.base(); l != loop_stack_.end(); ++l) {
    above = total;
    total *= (*l)->extent;
    next_task_start[(*l)->loop_var.get()] = make_int(0);
    counter = make_add(make_mul(counter, make_int((*l)->extent)), (*l)->loop_var);
  }
  std::vector<Stream> streams;
  find_streams(op->body, {}, {}, op, &streams);
  if (streams.empty()) return;
  llvm::Function *prefetch = llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::prefetch, {b_.getPtrTy()});
  for (const Stream &s : streams) {
    if (!uses_var(s.flat, task.get())) continue;
    std::optional<int64_t> per_task = index_step(s.flat, task.get(), task);
    if (!per_task || *per_task <= 0) continue;
    const int64_t elem = dtype_bytes(s.buffer->dtype);
    const int64_t lines = (*per_task * elem + 63) / 64;
    // Prefetched at the first level with an iteration per line, one line per iteration,
    // spread evenly over the task.
    if (total < lines || above >= lines) continue;
    Expr line = make_floordiv(make_mul(counter, make_int(lines)), make_int(total));
    Expr at = analyzer_.simplify(make_add(substitute(s.flat, next_task_start), make_mul(line, make_int(64 / elem))));
    // Read, locality 2 (L2: prefetcht1), data. The next task's last lines may lie past the
    // buffer's end (the last task); a prefetch never faults.
    b_.CreateCall(prefetch, {element_ptr(s.buffer, gen_scalar(at), /*maybe_outside=*/true), b_.getInt32(0),
                             b_.getInt32(2), b_.getInt32(1)});
  }
}

llvm::MDNode *CodeGen::loop_hint(const char *name, llvm::Metadata *value) {
  llvm::SmallVector<llvm::Metadata *, 3> ops;
  auto tmp = llvm::MDNode::getTemporary(ctx_, {});
  ops.push_back(tmp.get());
  llvm::SmallVector<llvm::Metadata *, 2> prop{llvm::MDString::get(ctx_, name)};
  if (value) prop.push_back(value);
  ops.push_back(llvm::MDNode::get(ctx_, prop));
  llvm::MDNode *node = llvm::MDNode::getDistinct(ctx_, ops);
  node->replaceOperandWith(0, node);
  return node;
}

llvm::MDNode *CodeGen::serial_loop_hint(const ForNode *op) {
  if (trip_count(op->body) <= kMaxAutoVectorizedBody) return nullptr;
  return loop_hint("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getFalse()));
}

int64_t CodeGen::trip_count(const Stmt &s) {
  if (!s.defined()) return 0;
  if (const auto *l = s.as<ForNode>()) return l->extent * trip_count(l->body);
  if (const auto *q = s.as<SeqNode>()) {
    int64_t n = 0;
    for (const Stmt &x : q->stmts) n += trip_count(x);
    return n;
  }
  if (const auto *b = s.as<BlockNode>()) return trip_count(b->body) + (b->init.defined() ? trip_count(b->init) : 0);
  if (const auto *i = s.as<IfThenElseNode>()) return trip_count(i->then_case) + trip_count(i->else_case);
  return 1;
}

void CodeGen::visit(const ForNode *op, const Stmt &self) {
  // pragma_auto_unroll_max_step: serial loops below whose whole subtree runs at most
  // that many innermost iterations are unrolled.
  auto pragma = op->annotations.find(ir::annotation::kAutoUnrollMaxStep);
  if (pragma != op->annotations.end()) {
    ScopedAssign<int64_t> unroll(auto_unroll_, pragma->second);
    emit_for(op, self);
    return;
  }
  emit_for(op, self);
}

void CodeGen::emit_for(const ForNode *op, const Stmt &self) {
  if (op->for_kind == ForKind::kSerial && auto_unroll_ > 0 && op->extent <= kMaxExplicitUnroll &&
      trip_count(self) <= auto_unroll_) {
    unroll_explicitly(op);
    return;
  }
  // A GPU thread's own arrays are registers only where every index is a constant: a
  // loop over one (the write-back of an accumulator tile) is unrolled, or the array
  // would live in local memory.
  if (gpu_ && op->for_kind == ForKind::kSerial && op->extent <= kMaxExplicitUnroll &&
      trip_count(self) <= kMaxGpuUnrolledLocalLoop && accesses_local_buffer(op->body)) {
    unroll_explicitly(op);
    return;
  }
  switch (op->for_kind) {
    case ForKind::kThreadBinding:
      throw CodegenError("loop '" + op->loop_var.name() + "' is bound to " + op->thread_tag +
                         ", which a CPU target cannot run; bind loops only for cuda targets");
    case ForKind::kParallel:
      if (lanes_ == 1) {
        emit_parallel(op);
        return;
      }
      break;
    case ForKind::kVectorized:
      // A GPU thread's vector accesses come from LLVM's load/store vectorizer over the
      // unrolled lanes (aligned neighbours become ld.v2/ld.v4).
      if (gpu_) {
        unroll_explicitly(op);
        return;
      }
      if (can_vectorize(op)) {
        emit_vector(op);
        return;
      }
      emit_loop(op, b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(op->extent)),
                loop_hint("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getTrue())));
      return;
    case ForKind::kUnrolled:
      if (op->extent <= kMaxExplicitUnroll) {
        unroll_explicitly(op);
        return;
      }
      emit_loop(op, b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(op->extent)), loop_hint("llvm.loop.unroll.full"));
      return;
    case ForKind::kSerial:
      // On a GPU the sampled unroll depth also covers loops too long to copy out here
      // (a thread's serial pass over a row): LLVM unrolls them fully.
      if (gpu_ && auto_unroll_ > 0 && trip_count(self) <= auto_unroll_) {
        emit_loop(op, b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(op->extent)),
                  loop_hint("llvm.loop.unroll.full"));
        return;
      }
      break;
  }
  emit_loop(op, b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(op->extent)), serial_loop_hint(op));
}

bool CodeGen::accesses_local_buffer(const Stmt &s) {
  bool found = false;
  for_each_stmt(s, [&](const Stmt &x) {
    if (const auto *st = x.as<StoreNode>()) found = found || st->buffer->scope == MemoryScope::kLocal;
  });
  for_each_expr(s, [&](const Expr &e) {
    if (const auto *ld = e.as<LoadNode>()) found = found || ld->buffer->scope == MemoryScope::kLocal;
  });
  return found;
}

void CodeGen::unroll_explicitly(const ForNode *op) {
  analyzer_.bind(op->loop_var, op->extent);
  for (int64_t i = 0; i < op->extent; ++i) {
    vars_[op->loop_var.get()] = b_.getInt64(static_cast<uint64_t>(i));
    visit_stmt(op->body);
  }
  vars_.erase(op->loop_var.get());
  analyzer_.unbind(op->loop_var);
}

namespace {
int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}
int64_t saturating_add(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

// What emitting a statement costs once its unrolled loops are copied out, decided as
// emit_for decides: innermost iterations of every loop (trip_count), statements emitted,
// and the unrolled loops on the path that emits the most.
struct UnrolledSize {
  int64_t trips = 0;
  int64_t statements = 0;
  std::vector<const ForNode *> loops;
};

UnrolledSize unrolled_size(const Stmt &s, int64_t auto_unroll) {
  UnrolledSize size;
  if (!s.defined()) return size;
  int64_t heaviest = 0;
  auto add = [&](const UnrolledSize &part) {
    size.trips = saturating_add(size.trips, part.trips);
    size.statements = saturating_add(size.statements, part.statements);
    if (part.statements > heaviest) {
      heaviest = part.statements;
      size.loops = part.loops;
    }
  };
  if (const auto *l = s.as<ForNode>()) {
    auto pragma = l->annotations.find(ir::annotation::kAutoUnrollMaxStep);
    if (pragma != l->annotations.end()) auto_unroll = pragma->second;
    UnrolledSize body = unrolled_size(l->body, auto_unroll);
    size.trips = saturating_mul(l->extent, body.trips);
    bool unrolled = l->for_kind == ForKind::kUnrolled || (l->for_kind == ForKind::kSerial && auto_unroll > 0 &&
                                                          l->extent <= kMaxExplicitUnroll && size.trips <= auto_unroll);
    size.statements = unrolled ? saturating_mul(l->extent, body.statements) : body.statements;
    if (unrolled) size.loops.push_back(l);
    size.loops.insert(size.loops.end(), body.loops.begin(), body.loops.end());
  } else if (const auto *q = s.as<SeqNode>()) {
    for (const Stmt &x : q->stmts) add(unrolled_size(x, auto_unroll));
  } else if (const auto *b = s.as<BlockNode>()) {
    add(unrolled_size(b->init, auto_unroll));
    add(unrolled_size(b->body, auto_unroll));
  } else if (const auto *i = s.as<IfThenElseNode>()) {
    add(unrolled_size(i->then_case, auto_unroll));
    add(unrolled_size(i->else_case, auto_unroll));
  } else {
    size.trips = size.statements = 1;
  }
  return size;
}
}  // namespace

void check_unrolled_size(const PrimFunc &func) {
  UnrolledSize size = unrolled_size(func.body, 0);
  if (size.statements <= kMaxUnrolledStatements) return;
  std::string loops;
  for (const ForNode *l : size.loops)
    loops += (loops.empty() ? "" : ", ") + l->loop_var.name() + " (" + std::to_string(l->extent) + ")";
  std::string count =
      size.statements == std::numeric_limits<int64_t>::max() ? "more than 2^63" : std::to_string(size.statements);
  throw CodegenError("unrolling loop" + std::string(size.loops.size() == 1 ? " " : "s ") + loops + " of '" + func.name +
                     "' would emit " + count + " statements; at most " + std::to_string(kMaxUnrolledStatements) +
                     " may be unrolled (unroll fewer or shorter loops, or a smaller pragma_auto_unroll_max_step)");
}

}  // namespace detail

// Metadata the loader reads to allocate arguments (abi.h).
static void emit_artifact_info(llvm::Module &mod, const ir::LayoutRewrite &lowered, const Target &target) {
  const ir::PrimFunc &func = lowered.kernel;
  nlohmann::json info{
      {"kiln_abi", lowered.packed.empty() ? 1 : KILN_ABI_VERSION}, {"name", func.name}, {"target", target.str()}};
  info["params"] = nlohmann::json::array();
  std::unordered_set<const ir::BufferNode *> written;
  ir::for_each_stmt(func.body, [&](const ir::Stmt &s) {
    if (const auto *st = s.as<ir::StoreNode>()) written.insert(st->buffer.get());
  });
  for (size_t i = 0; i < func.params.size(); ++i) {
    const ir::Buffer &p = func.params[i];
    nlohmann::json param{{"name", p->name},
                         {"dtype", ir::dtype_name(p->dtype)},
                         {"shape", p->shape},
                         {"role", written.count(p.get()) ? "output" : "input"}};
    for (const ir::PackedInput &packed : lowered.packed)
      if (packed.param == i)
        param["packed_from"] = {{"name", packed.original->name},
                                {"dtype", ir::dtype_name(packed.original->dtype)},
                                {"shape", packed.original->shape}};
    info["params"].push_back(std::move(param));
  }
  llvm::LLVMContext &ctx = mod.getContext();
  llvm::Constant *text = llvm::ConstantDataArray::getString(ctx, info.dump(), /*AddNull=*/true);
  new llvm::GlobalVariable(mod, text->getType(), true, llvm::GlobalValue::ExternalLinkage, text, KILN_INFO_SYMBOL);
}

std::unique_ptr<llvm::Module> lower_to_llvm(const ir::PrimFunc &func, const Target &target, llvm::LLVMContext &ctx,
                                            llvm::TargetMachine &tm) {
  auto mod = std::make_unique<llvm::Module>(func.name, ctx);
  mod->setTargetTriple(tm.getTargetTriple().str());
  mod->setDataLayout(tm.createDataLayout());
  ir::LayoutRewrite lowered = ir::lower_with_prepack(func);
  // Before any LLVM IR: every path that builds a program (kiln measure, compile, the
  // tuner's builders, a runner's reference) comes through here.
  detail::check_unrolled_size(lowered.kernel);
  if (lowered.prepack) detail::check_unrolled_size(*lowered.prepack);
  detail::CodeGen(ctx, *mod, target).emit_function(lowered.kernel, KILN_ENTRY_SYMBOL);
  if (lowered.prepack) detail::CodeGen(ctx, *mod, target).emit_function(*lowered.prepack, KILN_PREPACK_SYMBOL);
  emit_artifact_info(*mod, lowered, target);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*mod, &os)) throw CodegenError("generated LLVM IR is invalid (a Kiln bug): " + os.str());
  return mod;
}

}  // namespace kiln::codegen
