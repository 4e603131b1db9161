// Lowering a scheduled program to GPU kernels, and the checks a GPU imposes on it.
//
// A schedule for a GPU binds loops to the grid (`blockIdx.x|y|z`), to the threads of
// a block (`threadIdx.x|y|z`) and to virtual threads (`vthread.x|y|z`, serial loops a
// thread runs unrolled), and stages data through `shared` (one copy per thread block)
// and `local` (one copy per thread) buffers. Read as loops, such a program has
// sequential semantics, which the interpreter checks like any other. lower_for_gpu
// gives it GPU semantics: each statement under the root becomes one kernel; a bound
// loop becomes its thread or block index (guarded where the launch is wider than the
// loop), so nested loops bound to the same axis name the same threads (the cooperative
// fetch of a shared tile inside the loops of the threads that read it); barriers are
// inserted where threads read or overwrite shared data other threads wrote; and the
// result is verified against the GPU's limits, with the reason when refused.
#pragma once

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/stmt.h"

namespace kiln::ir {

/// What a GPU allows one kernel (the target's arch table fills it; ir/ knows no targets).
struct GpuLimits {
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block_dims = {1024, 1024, 64};
  std::array<int64_t, 3> max_grid_dims = {2147483647, 65535, 65535};
  /// Per block, with the opt-in where the arch has one (kernels above 48 KiB opt in).
  int64_t max_shared_bytes_per_block = 48 * 1024;
  /// Product of the vthread extents around any statement.
  int64_t max_vthreads = 8;
  /// Widest vectorized access (16 bytes: a float4).
  int64_t max_vector_bytes = 16;
  /// Local (per-thread) buffers beyond this would live in slow local memory, not registers.
  int64_t max_local_bytes_per_thread = 4096;

  /// The limits of a device from its target's facts: threads and shared bytes per
  /// block, and registers per thread (a thread's own buffers up to what they hold).
  static GpuLimits of(int64_t max_threads_per_block, int64_t max_shared_bytes_per_block,
                      int64_t max_registers_per_thread) {
    GpuLimits l;
    l.max_threads_per_block = max_threads_per_block;
    l.max_shared_bytes_per_block = max_shared_bytes_per_block;
    l.max_local_bytes_per_thread = max_registers_per_thread * 4;
    return l;
  }
};

/// One launch: what a thread runs, over which grid and block.
struct GpuKernel {
  std::string name;
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  /// The variables standing for blockIdx.x|y|z and threadIdx.x|y|z in `body`.
  std::array<Var, 3> block_index, thread_index;
  /// What one thread runs: bound loops replaced by indices, barriers inserted. Shared
  /// buffers are listed in `shared` and allocated once per block wherever their
  /// allocation block sits; every other allocation is the thread's own.
  Stmt body;
  std::vector<Buffer> shared;
  /// Bytes of `shared` laid out in order, each 16-byte aligned (what the launch reserves).
  int64_t shared_bytes = 0;
  /// Upper bound of the thread's own buffers (allocations nested in sequence add up).
  int64_t local_bytes = 0;
  int64_t threads_per_block() const { return block[0] * block[1] * block[2]; }
};

/// A program as kernels launched in order on one stream.
struct GpuProgram {
  std::string name;
  std::vector<Buffer> params;  // inputs then outputs, as the PrimFunc's
  /// Intermediates that outlive a kernel (written by one, read by a later one): device
  /// memory the launcher allocates.
  std::vector<Buffer> global_scratch;
  std::vector<GpuKernel> kernels;
};

/// A schedule that cannot run on a GPU as it is: the message says which loop, block or
/// buffer and what to change.
struct GpuLoweringError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Lowers and verifies (threads per block and per axis, grid, shared memory, vthreads,
/// vector width, local bytes, barriers only where every thread of a block arrives);
/// throws GpuLoweringError.
GpuProgram lower_for_gpu(const PrimFunc &func, const GpuLimits &limits);

/// Byte offset of each of `kernel.shared` in the block's shared memory.
std::vector<int64_t> shared_offsets(const GpuKernel &kernel);

/// Readable text: each kernel's launch, shared buffers and body.
std::string to_string(const GpuProgram &program);

}  // namespace kiln::ir
