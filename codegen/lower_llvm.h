// Lowering of a loop program to an LLVM module (internal to codegen).
#pragma once

#include <memory>
#include <string>

#include "ir/gpu_lower.h"
#include "ir/stmt.h"
#include "target/target.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

/// Builds the module exporting kiln_entry and kiln_artifact_info for `func`.
/// Vectorized loops become LLVM vector code where the body allows it (contiguous
/// accesses as vector loads/stores, invariant values as broadcasts, other accesses
/// as gathers); otherwise they stay scalar with a vectorization hint. Unrolled loops of
/// up to 64 iterations are unrolled here, longer ones get LLVM's full-unroll hint;
/// parallel loops are outlined into task functions run by
/// kiln_rt_parallel_for.
std::unique_ptr<llvm::Module> lower_to_llvm(const ir::PrimFunc &func, const Target &target, llvm::LLVMContext &ctx,
                                            llvm::TargetMachine &tm);

/// The NVPTX module of `program`'s kernels, one kernel function each (emit_cuda.cc).
std::unique_ptr<llvm::Module> lower_to_nvptx(const ir::GpuProgram &program, llvm::LLVMContext &ctx,
                                             llvm::TargetMachine &tm, const Target &target);

}  // namespace kiln::codegen
