// A program compiled for a CUDA target, as a file (`NAME.cuda.json`): the PTX, the
// kernel-argument buffers and the launches in order (codegen/cuda.h writes it, this
// reads it back on the measuring host, which needs no compiler and no CUDA toolkit).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/runtime/abi.h"
#include "ir/dtype.h"

namespace kiln::device {

/// A kernel argument. Whoever launches passes every buffer 16-byte aligned (device
/// allocations are): the kernels' vector loads and stores rely on it.
struct CudaArtifactBuffer {
  std::string name;
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<int64_t> shape;
  std::string role;  ///< "input", "output" or "scratch"
  int64_t bytes() const;
};

struct CudaArtifactLaunch {
  std::string name;
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t shared_bytes = 0;
};

struct CudaArtifact {
  std::string name, target, arch, ptx_isa, ptx;
  /// The cubin for exactly `arch` and the CUDA release that made it; empty when the
  /// artifact carries PTX only.
  std::string cubin, cubin_toolkit;
  std::vector<CudaArtifactBuffer> buffers;  ///< every kernel's arguments, in order
  std::vector<CudaArtifactLaunch> launches;
};

/// Parses and checks an artifact's text; throws std::invalid_argument saying what is
/// wrong (not JSON, another version, a missing field, a bad dtype, shape, role, grid or
/// block, a launch naming no kernel of the PTX).
CudaArtifact parse_cuda_artifact(const std::string &text);

/// Reads `path` and parses it; std::invalid_argument names the file.
CudaArtifact read_cuda_artifact(const std::string &path);

}  // namespace kiln::device
