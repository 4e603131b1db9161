// Scheduled GEMMs shared by the cost-model tests.
#pragma once

#include <cstdint>

#include "ir/stmt.h"

namespace kiln::costmodel::testing {

/// matmul of (m x k) by (k x n) tiled as i, j_outer, k, j_inner; j_inner has extent
/// `tile` and is vectorized when `vectorize` is set, i is parallel when `parallel`.
/// With tile_i > 1, i is split too: i_outer, j_outer, k, i_inner, j_inner.
ir::PrimFunc tiled_gemm(int64_t m, int64_t n, int64_t k, int64_t tile, bool vectorize, bool parallel = false,
                        int64_t tile_i = 1);

}  // namespace kiln::costmodel::testing
