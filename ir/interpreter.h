// The reference interpreter: executes any loop program on host tensors. It is the
// correctness oracle for schedules, sampled traces and generated code.
#pragma once

#include <vector>

#include "ir/host_tensor.h"
#include "ir/stmt.h"

namespace kiln::ir {

/// Runs `func` with one tensor per parameter (same order, shapes and dtypes; checked).
/// Vectorized, unrolled and parallel loops run serially in order; thread-bound loops are
/// simulated by running their iterations in order, which is a legal schedule of the
/// threads for programs without intra-block synchronisation. Throws IRError on an
/// out-of-bounds access, naming the buffer, the indices and the enclosing block.
void interpret(const PrimFunc &func, const std::vector<HostTensor *> &args);

/// Convenience: allocates outputs (the trailing params not given as inputs), runs, and
/// returns them.
std::vector<HostTensor> interpret(const PrimFunc &func, const std::vector<HostTensor> &inputs);

}  // namespace kiln::ir
