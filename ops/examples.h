// Small example workloads, one or more per operator plus typical fused subgraphs. They
// drive the property tests of lowering, every schedule primitive and codegen, so they
// are deliberately tiny (at most ~20k multiply-adds each, the interpreter is slow) and
// deliberately awkward: prime and non-divisible extents, strides, asymmetric padding,
// dilation, groups, broadcasting, and integer dtypes.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ops/workload.h"

namespace kiln::ops {

struct NamedWorkload {
  std::string name;  // unique, e.g. "conv2d_nchw_s2_p1"
  ops::Workload workload;
};

/// Prints the example's name (GoogleTest finds it by argument-dependent lookup and uses
/// it to name parameterized cases instead of dumping bytes).
void PrintTo(const NamedWorkload &w, std::ostream *os);

/// The examples in a fixed order (tests and reports refer to them by name).
std::vector<NamedWorkload> small_example_workloads();

}  // namespace kiln::ops
