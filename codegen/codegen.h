// Code generation: lowers a scheduled loop program to machine code through LLVM and
// emits an artifact (a shared library with the ABI of abi.h).
//
// Float semantics: operations run in the program's order and precision; the only
// liberty taken is contracting a*b+c into one fused multiply-add. Reductions accumulate
// in the order of their (scheduled) loops and are never reassociated, so a schedule
// changes a reduction's result only through its loop order.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "ir/stmt.h"
#include "target/target.h"

namespace kiln::codegen {

/// A program Kiln cannot compile for the target (e.g. a thread-bound loop for a CPU).
struct CodegenError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CudaModule;  // cuda.h

/// A kernel compiled into a relocatable object for linking into another program
/// (`kiln export`): the artifact's functions under names of the caller's choosing.
struct KernelObject {
  std::string object;     ///< ELF relocatable object bytes
  std::string info_json;  ///< what kiln_artifact_info holds: params, roles, dtypes, shapes
  bool has_prepack = false;
};

struct BuildStats {
  double lower_seconds = 0;     // TIR -> LLVM IR
  double optimize_seconds = 0;  // LLVM optimization pipeline
  double emit_seconds = 0;      // machine code emission
  double link_seconds = 0;      // object -> shared library
};

/// Owns one LLVM context and target machine per target; not thread-safe: a builder pool
/// keeps one per worker thread.
class Compiler {
 public:
  Compiler();
  ~Compiler();
  Compiler(const Compiler &) = delete;
  Compiler &operator=(const Compiler &) = delete;

  /// Compiles `func` into its backend's artifact at `output_path`: a shared library for
  /// a CPU, build_cuda_artifact's NAME.cuda.json for CUDA; throws CodegenError.
  /// With `needs_runtime_library`, the library records its dependency on
  /// libkiln_runtime.so.1 (DT_NEEDED), so that it loads in a process that holds the
  /// runtime in a local symbol scope (Python's ctypes, dlopen without RTLD_GLOBAL): a
  /// compiled model's step. Candidates do without: the measurement server carries the
  /// runtime in its own executable.
  BuildStats build_artifact(const ir::PrimFunc &func, const Target &target, const std::string &output_path,
                            bool needs_runtime_library = false);
  /// Compiles `func` into an object whose kiln_entry is named `symbol`, kiln_prepack
  /// `symbol`_prepack and kiln_artifact_info `symbol`_info (abi.h otherwise), so that
  /// several kernels link into one program. `symbol` must be a C identifier.
  KernelObject build_object(const ir::PrimFunc &func, const Target &target, const std::string &symbol);
  /// The LLVM IR text (after optimization) for inspection and tests.
  std::string emit_llvm_ir(const ir::PrimFunc &func, const Target &target);
  /// Target assembly text.
  std::string emit_assembly(const ir::PrimFunc &func, const Target &target);
  /// Lowers `func` (scheduled with thread bindings) for a cuda target to PTX: GPU
  /// lowering and verification (ir/gpu_lower.h, refusals as CodegenError with the
  /// reason), NVPTX code generation, LLVM's O3 pipeline, PTX emission. `ptxas` is not
  /// run here (cuda.h: run_ptxas).
  CudaModule build_cuda(const ir::PrimFunc &func, const Target &target);
  /// build_cuda, then, where the CUDA toolkit is installed, `ptxas`: its register counts
  /// complete the verification (check_registers: a block needing more registers than an
  /// SM has never launches) and its cubin goes into the artifact. Writes the artifact
  /// file (NAME.cuda.json) to `output_path`; throws CodegenError.
  CudaModule build_cuda_artifact(const ir::PrimFunc &func, const Target &target, const std::string &output_path);
  /// The CPU LLVM generates code for under `target`: its -mcpu, or for the host's own
  /// CPU (`native`) the name whose scheduling model LLVM uses for this host.
  std::string llvm_cpu(const Target &target);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen
