// Parallel loops: the loop body is outlined into a task function that the runtime's
// thread pool runs in static chunks; a closure carries every variable and buffer
// pointer in scope.
#include "codegen/llvm_emitter.h"
#include "codegen/runtime/abi.h"

namespace kiln::codegen::detail {

void CodeGen::emit_parallel(const ForNode *op) {
  std::vector<const VarNode *> cap_vars;
  std::vector<const BufferNode *> cap_bufs;
  std::vector<llvm::Value *> values;
  for (const auto &[v, val] : vars_) {
    cap_vars.push_back(v);
    values.push_back(val);
  }
  for (const auto &[buf, val] : buffers_) {
    cap_bufs.push_back(buf);
    values.push_back(val);
  }
  llvm::Type *ptr = b_.getPtrTy();
  std::vector<llvm::Type *> fields;
  for (llvm::Value *v : values) fields.push_back(v->getType());
  llvm::StructType *closure_ty = llvm::StructType::get(ctx_, fields);
  llvm::Value *closure = entry_alloca(closure_ty, 1, 8);
  for (size_t i = 0; i < values.size(); ++i)
    b_.CreateStore(values[i], b_.CreateStructGEP(closure_ty, closure, static_cast<unsigned>(i)));

  auto *task_ty = llvm::FunctionType::get(b_.getInt32Ty(), {b_.getInt64Ty(), b_.getInt64Ty(), ptr}, false);
  llvm::Function *task =
      llvm::Function::Create(task_ty, llvm::Function::InternalLinkage, "kiln_task_" + op->loop_var.name(), mod_);
  add_cpu_attrs(task);
  // Save this function's state, generate the task, restore.
  llvm::Function *saved_fn = fn_;
  llvm::BasicBlock *saved_bb = b_.GetInsertBlock();
  auto saved_vars = vars_;
  auto saved_bufs = buffers_;
  auto saved_workspaces = std::move(live_workspaces_);
  live_workspaces_.clear();  // the task frees only what it allocates
  fn_ = task;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", task));
  llvm::Value *arg_closure = task->getArg(2);
  for (size_t i = 0; i < values.size(); ++i) {
    llvm::Value *v = b_.CreateLoad(fields[i], b_.CreateStructGEP(closure_ty, arg_closure, static_cast<unsigned>(i)));
    if (i < cap_vars.size()) {
      vars_[cap_vars[i]] = v;
    } else {
      buffers_[cap_bufs[i - cap_vars.size()]] = v;
    }
  }
  // Static chunking: task t runs [t*chunk, min(extent, (t+1)*chunk)).
  llvm::Value *n = b_.getInt64(static_cast<uint64_t>(op->extent));
  llvm::Value *tasks = task->getArg(1);
  llvm::Value *chunk = b_.CreateUDiv(b_.CreateAdd(n, b_.CreateSub(tasks, b_.getInt64(1))), tasks);
  llvm::Value *begin = b_.CreateMul(task->getArg(0), chunk);
  llvm::Value *end = b_.CreateAdd(begin, chunk);
  end = b_.CreateSelect(b_.CreateICmpSLT(end, n), end, n);
  emit_loop(op, begin, end, serial_loop_hint(op));
  b_.CreateRet(b_.getInt32(0));
  fn_ = saved_fn;
  vars_ = std::move(saved_vars);
  buffers_ = std::move(saved_bufs);
  live_workspaces_ = std::move(saved_workspaces);
  b_.SetInsertPoint(saved_bb);
  // Never more tasks than iterations.
  llvm::Value *threads =
      b_.CreateSExt(b_.CreateCall(runtime_fn("kiln_rt_num_threads", b_.getInt32Ty(), {})), b_.getInt64Ty());
  llvm::Value *num_tasks = b_.CreateSelect(b_.CreateICmpSLT(threads, n), threads, n);
  return_if_failed(b_.CreateCall(runtime_fn("kiln_rt_parallel_for", b_.getInt32Ty(), {b_.getInt64Ty(), ptr, ptr}),
                                 {num_tasks, task, closure}));
}

}  // namespace kiln::codegen::detail
