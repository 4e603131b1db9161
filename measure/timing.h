// The timing protocol proper (after the correctness check): warm-up, growing `number`
// to min_repeat_ms, then `repeat` timed repeats. Runs inside the candidate's process.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/abi.h"
#include "measure/timing_options.h"

namespace kiln::measure::detail {

struct TimingOutcome {
  std::vector<double> repeat_seconds;  // mean seconds per call, one per repeat
  int64_t number = 0;
  int64_t calibration_calls = 0;
  /// Non-zero: kiln_entry returned this during the warm-up or a timed call; timing
  /// stopped there.
  int32_t failed_code = 0;
  /// The warm-up call exceeded give_up_after_seconds: repeat_seconds holds that call.
  bool gave_up = false;
};

TimingOutcome time_kernel(kiln_entry_fn entry, void **args, const TimingOptions &options);

/// Bytes written to evict the caches: twice the last-level cache, within [16, 256] MiB.
int64_t cache_flush_bytes();

}  // namespace kiln::measure::detail
