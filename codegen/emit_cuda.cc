// NVPTX kernels: the GPU side of the emitter (llvm_emitter.h) and the module that holds
// a program's kernels.
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "codegen/llvm_emitter.h"
#include "codegen/lower_llvm.h"

namespace kiln::codegen {
namespace detail {

namespace {

// The block's dynamic shared memory (`extern __shared__`), sized by the launch.
constexpr const char *kSharedSymbol = "kiln_shared";
constexpr unsigned kSharedAddressSpace = 3;

llvm::Intrinsic::ID block_index_intrinsic(int axis) {
  static const llvm::Intrinsic::ID ids[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  return ids[axis];
}

llvm::Intrinsic::ID thread_index_intrinsic(int axis) {
  static const llvm::Intrinsic::ID ids[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z};
  return ids[axis];
}

}  // namespace

void CodeGen::emit_kernel(const GpuKernel &kernel, const std::vector<Buffer> &buffers) {
  gpu_ = true;
  PrimFunc scope_of;
  scope_of.params = buffers;
  scope_of.body = kernel.body;
  make_alias_scopes(scope_of);
  llvm::Type *ptr = b_.getPtrTy();
  std::vector<llvm::Type *> param_types(buffers.size(), ptr);
  auto *type = llvm::FunctionType::get(b_.getVoidTy(), param_types, false);
  llvm::Function *fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, kernel.name, mod_);
  for (size_t i = 0; i < buffers.size(); ++i) {
    auto arg = static_cast<unsigned>(i);
    fn->addParamAttr(arg, llvm::Attribute::NoAlias);
    fn->addParamAttr(arg, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(16)));
    fn->getArg(arg)->setName(buffers[i]->name);
    buffers_[buffers[i].get()] = fn->getArg(arg);
  }
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  // A kernel entry, and the block shape it is launched with: ptxas budgets registers
  // for exactly that many threads.
  llvm::NamedMDNode *annotations = mod_.getOrInsertNamedMetadata("nvvm.annotations");
  auto annotate = [&](const char *key, int64_t value) {
    annotations->addOperand(
        llvm::MDNode::get(ctx_, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx_, key),
                                 llvm::ConstantAsMetadata::get(b_.getInt32(static_cast<uint32_t>(value)))}));
  };
  annotate("kernel", 1);
  annotate("maxntidx", kernel.block[0]);
  annotate("maxntidy", kernel.block[1]);
  annotate("maxntidz", kernel.block[2]);
  fn_ = fn;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
  for (int a = 0; a < 3; ++a) {
    llvm::Value *block = b_.CreateZExt(b_.CreateIntrinsic(block_index_intrinsic(a), {}, {}), b_.getInt64Ty());
    llvm::Value *thread = b_.CreateZExt(b_.CreateIntrinsic(thread_index_intrinsic(a), {}, {}), b_.getInt64Ty());
    vars_[kernel.block_index[a].get()] = block;
    vars_[kernel.thread_index[a].get()] = thread;
    gpu_thread_index_[a] = kernel.thread_index[a].get();
    gpu_block_[a] = kernel.block[a];
    analyzer_.bind(kernel.block_index[a], kernel.grid[a]);
    analyzer_.bind(kernel.thread_index[a], kernel.block[a]);
  }
  if (!kernel.shared.empty()) {
    auto *bytes = llvm::ArrayType::get(b_.getInt8Ty(), 0);
    llvm::GlobalVariable *shared = mod_.getNamedGlobal(kSharedSymbol);
    if (!shared) {
      shared = new llvm::GlobalVariable(mod_, bytes, false, llvm::GlobalValue::ExternalLinkage, nullptr, kSharedSymbol,
                                        nullptr, llvm::GlobalValue::NotThreadLocal, kSharedAddressSpace);
      shared->setAlignment(llvm::Align(16));
    }
    std::vector<int64_t> offsets = shared_offsets(kernel);
    for (size_t i = 0; i < kernel.shared.size(); ++i) {
      llvm::Value *at = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), shared, static_cast<uint64_t>(offsets[i]));
      buffers_[kernel.shared[i].get()] = b_.CreateAddrSpaceCast(at, ptr);
    }
  }
  visit_stmt(kernel.body);
  b_.CreateRetVoid();
}

namespace {

llvm::Value *combine_values(llvm::IRBuilder<> &b, Combiner c, llvm::Value *x, llvm::Value *y) {
  bool fp = x->getType()->isFloatingPointTy();
  switch (c) {
    case Combiner::kSum:
      return fp ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);
    case Combiner::kMax:
      return b.CreateSelect(fp ? b.CreateFCmpOGT(x, y) : b.CreateICmpSGT(x, y), x, y);
    case Combiner::kMin:
      return b.CreateSelect(fp ? b.CreateFCmpOLT(x, y) : b.CreateICmpSLT(x, y), x, y);
  }
  return x;
}

}  // namespace

void CodeGen::visit(const ThreadAllReduceNode *op, const Stmt &) {
  llvm::Type *type = storage_type(op->value->dtype);
  if (!type->isFloatTy() && !type->isIntegerTy(32))
    throw CodegenError("a cross-thread reduction of " + std::string(dtype_name(op->value->dtype)) +
                       " values; GPU shuffles move float32 and int32");
  llvm::Value *slot = buffers_.at(op->value.get());
  llvm::Value *v = b_.CreateLoad(type, slot);
  // Lanes of a warp the block does not fill must stay out of the shuffle's mask.
  int64_t threads = gpu_block_[0] * gpu_block_[1] * gpu_block_[2];
  uint32_t mask = threads >= 32 ? 0xffffffffu : static_cast<uint32_t>((uint64_t{1} << threads) - 1);
  auto butterfly = [&](llvm::Value *x, int64_t width) {
    for (int64_t offset = width / 2; offset >= 1; offset /= 2) {
      llvm::Value *other =
          type->isFloatTy()
              ? b_.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_f32, {},
                                   {b_.getInt32(mask), x, b_.getInt32(static_cast<uint32_t>(offset)), b_.getInt32(31)})
              : b_.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                                   {b_.getInt32(mask), x, b_.getInt32(static_cast<uint32_t>(offset)), b_.getInt32(31)});
      x = combine_values(b_, op->combiner, x, other);
    }
    return x;
  };
  v = butterfly(v, std::min<int64_t>(op->extent, 32));
  if (op->scratch) {
    // Lane 0 of each warp leaves its warp's result; after a barrier every warp combines
    // the results of its group's warps.
    int64_t warps = op->extent / 32;
    llvm::Value *tx = thread_index_value(0);
    llvm::Value *lane = b_.CreateURem(tx, b_.getInt64(32));
    llvm::Value *linear = linear_thread_index();
    llvm::Value *group_base = b_.CreateMul(b_.CreateUDiv(linear, b_.getInt64(static_cast<uint64_t>(op->extent))),
                                           b_.getInt64(static_cast<uint64_t>(warps)));
    llvm::Value *scratch = buffers_.at(op->scratch.get());
    llvm::BasicBlock *write = llvm::BasicBlock::Create(ctx_, "warp.result", fn_);
    llvm::BasicBlock *written = llvm::BasicBlock::Create(ctx_, "warp.written", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(lane, b_.getInt64(0)), write, written);
    b_.SetInsertPoint(write);
    llvm::Value *warp = b_.CreateUDiv(tx, b_.getInt64(32));
    b_.CreateStore(v, b_.CreateInBoundsGEP(type, scratch, b_.CreateAdd(group_base, warp)));
    b_.CreateBr(written);
    b_.SetInsertPoint(written);
    b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::nvvm_barrier0));
    llvm::Value *in_range = b_.CreateICmpULT(lane, b_.getInt64(static_cast<uint64_t>(warps)));
    llvm::Value *index = b_.CreateSelect(in_range, lane, b_.getInt64(0));
    llvm::Value *mine = b_.CreateLoad(type, b_.CreateInBoundsGEP(type, scratch, b_.CreateAdd(group_base, index)));
    llvm::Value *identity = gen(combiner_identity(op->combiner, op->value->dtype));
    v = butterfly(b_.CreateSelect(in_range, mine, identity), 32);
    // The scratch may be written again by the next reduction.
    b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::nvvm_barrier0));
  }
  b_.CreateStore(v, slot);
}

llvm::Value *CodeGen::thread_index_value(int axis) { return vars_.at(gpu_thread_index_[axis]); }

llvm::Value *CodeGen::linear_thread_index() {
  llvm::Value *x = thread_index_value(0), *y = thread_index_value(1), *z = thread_index_value(2);
  llvm::Value *bx = b_.getInt64(static_cast<uint64_t>(gpu_block_[0]));
  llvm::Value *bxy = b_.getInt64(static_cast<uint64_t>(gpu_block_[0] * gpu_block_[1]));
  return b_.CreateAdd(x, b_.CreateAdd(b_.CreateMul(y, bx), b_.CreateMul(z, bxy)));
}

llvm::Value *CodeGen::gpu_log2(llvm::Value *x, double scale) {
  llvm::Value *in = b_.CreateFPCast(x, b_.getFloatTy());
  llvm::Value *l = b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::nvvm_lg2_approx_f), {in});
  if (scale != 1.0) l = b_.CreateFMul(l, llvm::ConstantFP::get(b_.getFloatTy(), scale));
  return b_.CreateFPCast(l, x->getType());
}

llvm::Value *CodeGen::gpu_exp2(llvm::Value *x) {
  llvm::Value *in = b_.CreateFPCast(x, b_.getFloatTy());
  llvm::Value *e = b_.CreateCall(llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::nvvm_ex2_approx_f), {in});
  return b_.CreateFPCast(e, x->getType());
}

}  // namespace detail

std::unique_ptr<llvm::Module> lower_to_nvptx(const ir::GpuProgram &program, llvm::LLVMContext &ctx,
                                             llvm::TargetMachine &tm, const Target &target) {
  auto mod = std::make_unique<llvm::Module>(program.name, ctx);
  mod->setTargetTriple(tm.getTargetTriple().str());
  mod->setDataLayout(tm.createDataLayout());
  std::vector<ir::Buffer> buffers = program.params;
  buffers.insert(buffers.end(), program.global_scratch.begin(), program.global_scratch.end());
  for (const ir::GpuKernel &k : program.kernels) {
    detail::check_unrolled_size(ir::PrimFunc{k.name, buffers, k.body, {}});
    detail::CodeGen(ctx, *mod, target).emit_kernel(k, buffers);
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*mod, &os)) throw CodegenError("generated NVPTX IR is invalid (a Kiln bug): " + os.str());
  return mod;
}

}  // namespace kiln::codegen
