// Floating-point operation counts of compute DAGs, for GFLOP/s reports.
#pragma once

#include <cstdint>

#include "te/te.h"

namespace kiln::te {

/// Arithmetic operations (add, sub, mul, div, min, max, math calls) of every stage,
/// times its iteration count; a reduction's combine counts once per point. A multiply-
/// add is 2, as GEMM's 2·M·N·K convention expects. Data movement counts 0.
double estimate_flops(const ComputeDAG &dag);

}  // namespace kiln::te
