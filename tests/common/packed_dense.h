// A dense layer whose schedule copies its weights into panels, the way the search's
// panel-packing sketches do: shared by the layout-rewrite tests of the IR, code
// generation and the runner.
#pragma once

#include <cstdint>

#include "ir/schedule/schedule.h"
#include "ops/workload.h"

namespace kiln::test_support {

/// dense(x[rows, k], W[n, k]) with W marked constant (or not).
ops::Workload dense_workload(int64_t rows, int64_t n, int64_t k, bool constant_weights);

/// Columns split into panels of `panel` (sample_tile: the last one partial when `panel`
/// does not divide n), loops ordered panel / rows / k / columns with the columns
/// vectorized, and W copied (cache_read) into a panel under `copy_under_rows` ? the
/// row loop : the panel loop. The copy under the rows repeats for every row though it
/// depends on the panel alone.
ir::Schedule packed_dense_schedule(const ir::PrimFunc &dense, int64_t panel, bool copy_under_rows);

}  // namespace kiln::test_support
