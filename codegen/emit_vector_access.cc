// Vector memory accesses: how an index varies across the lanes of a vectorized loop
// (invariant, contiguous, strided by a small constant, or anything else) decides
// whether a load or store becomes a broadcast, a vector load, a span load and a
// shuffle, or a gather/scatter, with masks for padded windows.
#include <llvm/Analysis/VectorUtils.h>

#include "codegen/codegen.h"
#include "codegen/llvm_emitter.h"

namespace kiln::codegen::detail {

Expr CodeGen::flat_index(const Buffer &buf, const std::vector<Expr> &indices) {
  Expr flat = make_int(0);
  for (size_t d = 0; d < indices.size(); ++d) flat = make_add(make_mul(flat, make_int(buf->shape[d])), indices[d]);
  return analyzer_.simplify(flat);
}

std::optional<int64_t> CodeGen::index_step(const Expr &flat, const VarNode *var, const Expr &var_expr) {
  Expr next = substitute(flat, VarMap{{var, make_add(var_expr, make_int(1))}});
  const auto *step = analyzer_.simplify(make_sub(next, flat)).as<IntImmNode>();
  if (!step) return std::nullopt;
  return step->value;
}

CodeGen::Pattern CodeGen::classify(const Expr &flat, int64_t *stride) {
  if (lanes_ == 1 || !uses_var(flat, vec_var_)) return Pattern::kScalar;
  std::optional<int64_t> step = index_step(flat, vec_var_, vec_var_expr_);
  if (step == 1) return Pattern::kContiguous;
  if (step && *step >= 2 && *step <= kMaxShuffledStride) {
    if (stride) *stride = *step;
    return Pattern::kStrided;
  }
  return Pattern::kGather;
}

const CodeGen::Access &CodeGen::access_of(const Expr &load, const Stmt &store, const Buffer &buf,
                                          const std::vector<Expr> &indices) {
  const void *node = load.defined() ? static_cast<const void *>(load.get()) : static_cast<const void *>(store.get());
  AccessKey key{node, vec_var_, lanes_, analyzer_.state_hash()};
  auto it = accesses_.find(key);
  if (it != accesses_.end()) return it->second;
  Access a;
  a.load = load;
  a.store = store;
  a.flat = flat_index(buf, indices);
  a.pattern = classify(a.flat, &a.stride);
  return accesses_.emplace(key, std::move(a)).first->second;
}

llvm::Value *CodeGen::gen_scalar(const Expr &e) {
  ScopedAssign<int> scalar(lanes_, 1);
  return gen(e);
}

llvm::Value *CodeGen::lane0(const Expr &flat) {
  // The index with the vector variable at lane 0.
  return gen_scalar(substitute(flat, VarMap{{vec_var_, make_int(0)}}));
}

llvm::Value *CodeGen::element_ptr(const Buffer &buf, llvm::Value *flat, bool maybe_outside) {
  auto it = buffers_.find(buf.get());
  if (it == buffers_.end()) throw CodegenError("buffer '" + buf->name + "' is used outside its scope");
  if (maybe_outside) return b_.CreateGEP(storage_type(buf->dtype), it->second, flat);
  return b_.CreateInBoundsGEP(storage_type(buf->dtype), it->second, flat);
}

llvm::Value *CodeGen::masked_load(llvm::FixedVectorType *vt, llvm::Value *ptr, llvm::Align align, llvm::Value *mask,
                                  const Buffer &buf) {
  unsigned n = vt->getNumElements();
  if (llvm::isPowerOf2_32(n)) return tag(b_.CreateMaskedLoad(vt, ptr, align, mask), buf);
  unsigned wide = llvm::PowerOf2Ceil(n);
  std::vector<int> widen, narrow;
  for (unsigned i = 0; i < wide; ++i) widen.push_back(i < n ? static_cast<int>(i) : static_cast<int>(n));
  for (unsigned i = 0; i < n; ++i) narrow.push_back(static_cast<int>(i));
  llvm::Value *off = llvm::Constant::getNullValue(mask->getType());
  llvm::Value *wide_mask = b_.CreateShuffleVector(mask, off, widen);
  auto *wide_type = llvm::FixedVectorType::get(vt->getElementType(), wide);
  llvm::Value *v = tag(b_.CreateMaskedLoad(wide_type, ptr, align, wide_mask), buf);
  return b_.CreateShuffleVector(v, narrow);
}

llvm::Value *CodeGen::masked_off_element(llvm::Type *elem) {
  std::string name = "kiln.masked_off_element.";
  llvm::raw_string_ostream(name) << *elem;
  return mod_.getOrInsertGlobal(name, elem, [&] {
    auto *zero = new llvm::GlobalVariable(mod_, elem, /*isConstant=*/true, llvm::GlobalValue::PrivateLinkage,
                                          llvm::Constant::getNullValue(elem), name);
    zero->setAlignment(llvm::Align(64));
    return zero;
  });
}

llvm::Value *CodeGen::strided_vector_load(const Buffer &buf, llvm::Value *first, int64_t stride, llvm::Align align) {
  auto lanes = static_cast<unsigned>(lanes_);
  auto span = static_cast<unsigned>((lanes_ - 1) * stride + 1);
  unsigned count = (span + lanes - 1) / lanes;
  auto *vt = llvm::FixedVectorType::get(storage_type(buf->dtype), lanes);
  std::vector<llvm::Value *> chunks;
  for (unsigned k = 0; k < count; ++k) {
    unsigned offset = std::min(k * lanes, span - lanes);
    llvm::Value *at = b_.CreateAdd(first, llvm::ConstantInt::get(first->getType(), offset));
    chunks.push_back(tag(b_.CreateAlignedLoad(vt, element_ptr(buf, at), align), buf));
  }
  std::vector<int> picks;
  for (unsigned l = 0; l < lanes; ++l) {
    unsigned element = l * static_cast<unsigned>(stride);
    unsigned k = std::min(element / lanes, count - 1);
    picks.push_back(static_cast<int>(k * lanes + element - std::min(k * lanes, span - lanes)));
  }
  return b_.CreateShuffleVector(llvm::concatenateVectors(b_, chunks), picks);
}

int64_t CodeGen::power_of_two_dividing(const Expr &e) {
  static constexpr int64_t kAny = int64_t{1} << 20;  // divides zero; caps what a product gives
  auto of_constant = [](int64_t c) { return c == 0 ? kAny : std::min(kAny, c & -c); };
  if (const auto *i = e.as<IntImmNode>()) return of_constant(i->value);
  if (const auto *v = e.as<VarNode>()) {
    auto it = vars_.find(v);
    if (it != vars_.end())
      if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(it->second)) return of_constant(c->getSExtValue());
    return 1;
  }
  if (const auto *a = e.as<AddNode>()) return std::min(power_of_two_dividing(a->a), power_of_two_dividing(a->b));
  if (const auto *s = e.as<SubNode>()) return std::min(power_of_two_dividing(s->a), power_of_two_dividing(s->b));
  if (const auto *m = e.as<MulNode>()) return std::min(kAny, power_of_two_dividing(m->a) * power_of_two_dividing(m->b));
  if (const auto *c = e.as<CastNode>(); c && !is_float(c->value.dtype())) return power_of_two_dividing(c->value);
  return 1;
}

llvm::Align CodeGen::gpu_align(const Expr &flat, const Buffer &buf) {
  // Every GPU buffer starts 16-byte aligned (kernel arguments, shared offsets, allocas).
  int64_t bytes = dtype_bytes(buf->dtype);
  return llvm::Align(static_cast<uint64_t>(std::min<int64_t>(16, bytes * power_of_two_dividing(flat))));
}

llvm::Value *CodeGen::visit(const LoadNode *op, const Expr &self) {
  const Access &access = access_of(self, Stmt(), op->buffer, op->indices);
  const Expr &flat = access.flat;
  llvm::Type *elem = storage_type(op->buffer->dtype);
  llvm::Align align(static_cast<uint64_t>(dtype_bytes(op->buffer->dtype)));
  llvm::Value *mask = masks_.empty() ? nullptr : masks_.back();
  llvm::Value *v = nullptr;
  int64_t stride = access.stride;
  Pattern pattern = access.pattern;
  switch (pattern) {
    case Pattern::kScalar: {
      if (lanes_ > 1) {
        // Invariant address: a masked-off lane may not be allowed to read it. One
        // enabled lane makes the read its own; with none, a constant stands in and no
        // lane uses what it reads. (A masked gather of one address would be expanded
        // into a branch per lane on CPUs without a fast gather: the partial tile of a
        // padded channel loop ran ~10x slower than the others, a tenth of a 1001-channel
        // convolution's time.)
        llvm::Value *idx = gen_scalar(flat);
        if (mask) {
          llvm::Value *ptr = element_ptr(op->buffer, idx, /*maybe_outside=*/true);
          llvm::Value *any_lane = b_.CreateOrReduce(mask);
          v = b_.CreateAlignedLoad(elem, b_.CreateSelect(any_lane, ptr, masked_off_element(elem)), align);
        } else {
          v = b_.CreateAlignedLoad(elem, element_ptr(op->buffer, idx), align);
        }
      } else {
        v = b_.CreateAlignedLoad(elem, element_ptr(op->buffer, gen(flat)), gpu_ ? gpu_align(flat, op->buffer) : align);
      }
      tag(v, op->buffer);
      break;
    }
    case Pattern::kContiguous: {
      llvm::Value *ptr = element_ptr(op->buffer, lane0(flat), mask != nullptr);
      auto *vt = llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes_));
      v = mask ? masked_load(vt, ptr, align, mask, op->buffer) : tag(b_.CreateAlignedLoad(vt, ptr, align), op->buffer);
      break;
    }
    case Pattern::kStrided: {
      // The span from the first lane's element to the last one's, exactly: no read
      // beyond what the scalar loop reads. Under a mask (a padded stride-2 window) the
      // span load is masked too: a lane's mask bit moves to its element, the elements
      // between lanes are off, so a masked-off lane's address is never touched.
      auto span = static_cast<unsigned>((lanes_ - 1) * stride + 1);
      auto *span_type = llvm::FixedVectorType::get(elem, span);
      llvm::Value *all = nullptr;
      if (mask) {
        std::vector<int> spread;
        for (unsigned i = 0; i < span; ++i)
          spread.push_back(i % stride == 0 ? static_cast<int>(i / stride) : static_cast<int>(lanes_));
        llvm::Value *span_mask = b_.CreateShuffleVector(mask, llvm::Constant::getNullValue(mask->getType()), spread);
        all = masked_load(span_type, element_ptr(op->buffer, lane0(flat), /*maybe_outside=*/true), align, span_mask,
                          op->buffer);
      } else if (llvm::isPowerOf2_32(static_cast<uint32_t>(lanes_))) {
        v = strided_vector_load(op->buffer, lane0(flat), stride, align);
        break;
      } else {
        all = tag(b_.CreateAlignedLoad(span_type, element_ptr(op->buffer, lane0(flat)), align), op->buffer);
      }
      std::vector<int> picks;
      for (int l = 0; l < lanes_; ++l) picks.push_back(static_cast<int>(l * stride));
      v = b_.CreateShuffleVector(all, picks);
      break;
    }
    case Pattern::kGather: {
      llvm::Value *idx = broadcast(gen(flat));
      llvm::Value *ptrs = element_ptr(op->buffer, idx, mask != nullptr);
      auto *vt = llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes_));
      llvm::Value *m = mask ? mask
                            : llvm::Constant::getAllOnesValue(
                                  llvm::FixedVectorType::get(b_.getInt1Ty(), static_cast<unsigned>(lanes_)));
      v = tag(b_.CreateMaskedGather(vt, ptrs, align, m), op->buffer);
      break;
    }
  }
  if (op->buffer->dtype == DType::kBool) v = b_.CreateTrunc(v, is_vec(v) ? value_type(DType::kBool) : b_.getInt1Ty());
  if (op->buffer->dtype == DType::kBFloat16) v = bfloat16_bits_to_float(v);
  return v;
}

void CodeGen::visit(const StoreNode *op, const Stmt &self) {
  const Access &access = access_of(Expr(), self, op->buffer, op->indices);
  const Expr &flat = access.flat;  // entries of accesses_ stay put while the value is emitted
  llvm::Value *value = gen(op->value);
  llvm::Type *elem = storage_type(op->buffer->dtype);
  llvm::Align align(static_cast<uint64_t>(dtype_bytes(op->buffer->dtype)));
  if (op->buffer->dtype == DType::kBFloat16) value = float_to_bfloat16_bits(value);
  if (op->buffer->dtype == DType::kBool)
    value = b_.CreateZExt(
        value,
        is_vec(value) ? llvm::cast<llvm::Type>(llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes_))) : elem);
  Pattern pattern = access.pattern;
  if (pattern == Pattern::kStrided) pattern = Pattern::kGather;  // scattered stores stay scatters
  // A lane-dependent block predicate (the partial tile of a padded vector loop).
  llvm::Value *mask = masks_.empty() ? nullptr : masks_.back();
  switch (pattern) {
    case Pattern::kScalar: {
      if (mask) throw CodegenError("a masked vector loop stores every lane to one element");
      llvm::Value *idx = gen_scalar(flat);
      // Every lane writes the same element: the last lane's value wins, as in order.
      if (is_vec(value)) value = b_.CreateExtractElement(value, static_cast<uint64_t>(lanes_ - 1));
      tag(b_.CreateAlignedStore(value, element_ptr(op->buffer, idx), gpu_ ? gpu_align(flat, op->buffer) : align),
          op->buffer);
      break;
    }
    case Pattern::kContiguous:
      if (mask) {
        tag(b_.CreateMaskedStore(broadcast(value), element_ptr(op->buffer, lane0(flat), /*maybe_outside=*/true), align,
                                 mask),
            op->buffer);
      } else {
        tag(b_.CreateAlignedStore(broadcast(value), element_ptr(op->buffer, lane0(flat)), align), op->buffer);
      }
      break;
    case Pattern::kStrided:
    case Pattern::kGather: {
      llvm::Value *ptrs = element_ptr(op->buffer, broadcast(gen(flat)), mask != nullptr);
      llvm::Value *lanes = mask ? mask
                                : llvm::Constant::getAllOnesValue(
                                      llvm::FixedVectorType::get(b_.getInt1Ty(), static_cast<unsigned>(lanes_)));
      tag(b_.CreateMaskedScatter(broadcast(value), ptrs, align, lanes), op->buffer);
      break;
    }
  }
}

bool CodeGen::can_vectorize(const ForNode *op) {
  if (lanes_ > 1 || op->extent < 2 || op->extent > 64) return false;
  bool ok = true;
  for_each_stmt(op->body, [&](const Stmt &s) {
    if (s.as<ForNode>() || s.as<IfThenElseNode>()) ok = false;
    if (const auto *b = s.as<BlockNode>()) {
      if (b->init.defined() || !b->alloc_buffers.empty()) ok = false;
      if (!is_const_int(b->predicate, 1) && uses_var(b->predicate, op->loop_var.get())) {
        // Lanes beyond a partial tile are masked off: every store must then write one
        // element per lane (not all lanes to one element).
        VarMap bindings;
        for (size_t k = 0; k < b->iter_vars.size(); ++k) bindings[b->iter_vars[k].var.get()] = b->iter_values[k];
        for_each_stmt(b->body, [&](const Stmt &inner) {
          const auto *store = inner.as<StoreNode>();
          if (!store) return;
          bool per_lane = false;
          for (const Expr &index : store->indices)
            per_lane = per_lane || uses_var(substitute(index, bindings), op->loop_var.get());
          if (!per_lane) ok = false;
        });
      }
    }
  });
  return ok;
}

void CodeGen::emit_vector(const ForNode *op) {
  ScopedAssign<int> vector_lanes(lanes_, static_cast<int>(op->extent));
  vec_var_ = op->loop_var.get();
  vec_var_expr_ = op->loop_var;
  std::vector<llvm::Constant *> lanes;
  for (int i = 0; i < lanes_; ++i) lanes.push_back(b_.getInt64(static_cast<uint64_t>(i)));
  vars_[vec_var_] = llvm::ConstantVector::get(lanes);
  analyzer_.bind(op->loop_var, op->extent);
  visit_stmt(op->body);
  analyzer_.unbind(op->loop_var);
  vars_.erase(vec_var_);
  vec_var_ = nullptr;
}

}  // namespace kiln::codegen::detail
