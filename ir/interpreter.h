// The reference interpreter: executes any loop program on host tensors. It is the
// correctness oracle for schedules, sampled traces and generated code.
#pragma once

#include <vector>

#include "ir/gpu_lower.h"
#include "ir/host_tensor.h"
#include "ir/stmt.h"

namespace kiln::ir {

/// Runs `func` with one tensor per parameter (same order, shapes and dtypes; checked).
/// Vectorized, unrolled and parallel loops run serially in order; thread-bound loops are
/// simulated by running their iterations in order, which is a legal schedule of the
/// threads for programs without intra-block synchronisation. Throws IRError on an
/// out-of-bounds access, naming the buffer, the indices and the enclosing block.
void interpret(const PrimFunc &func, const std::vector<HostTensor *> &args);

/// Runs a program lowered for a GPU as the GPU would: kernels in order, each over its
/// grid, the threads of a block interleaved at barriers (each runs up to the next
/// barrier, then the next thread does), shared buffers one per block, local ones per
/// thread. A missing barrier or a thread writing another's data shows as a different
/// result than the sequential program's; threads that disagree on the control flow
/// around a barrier throw IRError.
void interpret_gpu(const GpuProgram &program, const std::vector<HostTensor *> &args);

/// Convenience: allocates outputs (the trailing params not given as inputs), runs, and
/// returns them.
std::vector<HostTensor> interpret(const PrimFunc &func, const std::vector<HostTensor> &inputs);

}  // namespace kiln::ir
