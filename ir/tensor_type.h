// A tensor's type: shape, element type, and whether its data is fixed at compile time.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"

namespace kiln::ir {

struct TensorType {
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  /// The data is fixed when the program is compiled (a weight): a tuned program may
  /// read it in a layout packed once, ahead of time (see ir::rewrite_constant_layouts).
  /// Part of the key only when set, so the keys of other workloads do not change.
  bool constant = false;
};

}  // namespace kiln::ir
