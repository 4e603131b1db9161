// CUDA code generation: a scheduled program lowered to GPU kernels (ir/gpu_lower.h),
// emitted as PTX by LLVM's NVPTX backend, and checked by `ptxas` where the CUDA
// toolkit is installed. Why LLVM rather than CUDA C through NVRTC: codegen/README.md.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/ptxas.h"
#include "ir/gpu_lower.h"
#include "target/target.h"

namespace kiln::codegen {

/// The limits lower_for_gpu verifies a program against on `target` (a cuda target).
ir::GpuLimits gpu_limits(const Target &target);

/// The PTX ISA version Kiln writes for an arch: the lowest that has it, so that the
/// oldest drivers that know the arch can JIT-compile the PTX (sm_87: 7.4, which the
/// CUDA 11.4 of JetPack 5 reads; sm_90: 7.8, the newest LLVM 16 writes).
/// The arch's facts (target/cuda_arch.cc) hold it; CodegenError for an unknown arch.
std::string ptx_isa_for(const Target &target);

/// One launch of a compiled program.
struct CudaLaunch {
  std::string name;
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t shared_bytes = 0;  ///< dynamic shared memory the launch reserves
};

/// A kernel argument: a parameter of the program (role "input" or "output") or device
/// scratch between its kernels (role "scratch", allocated by whoever launches).
struct CudaBuffer {
  std::string name;
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<int64_t> shape;
  std::string role;
};

/// A program compiled for a CUDA target: PTX for the driver to load, the launches in
/// order (each kernel takes every buffer, in order), and what it was built for.
struct CudaModule {
  std::string name;
  std::string target;   ///< canonical target string
  std::string arch;     ///< "sm_90"
  std::string ptx_isa;  ///< "7.8"
  std::string ptx;
  /// The cubin ptxas made for exactly `arch`, and the CUDA release of that ptxas; empty
  /// where the toolkit is not installed. A driver of that release or newer loads it
  /// without JIT-compiling; others (a board's older driver) load the PTX.
  std::string cubin, cubin_toolkit;
  std::vector<CudaBuffer> buffers;
  std::vector<CudaLaunch> launches;
  /// Everything but the PTX, as JSON (the artifact's manifest).
  nlohmann::json manifest() const;
  /// The artifact file (`NAME.cuda.json`, device/cuda_artifact.h reads it): the
  /// manifest, the format version, the PTX and the cubin (hex) when there is one.
  std::string artifact_text() const;
};

/// Refuses, with CodegenError naming the kernel, a kernel that needs more registers
/// per thread than `target`'s arch has, or whose block needs more registers than an SM.
void check_registers(const CudaModule &module, const std::vector<PtxasKernelReport> &reports, const Target &target);

}  // namespace kiln::codegen
