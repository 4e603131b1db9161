// The timing protocol proper (after the correctness check): warm-up, growing `number`
// to min_repeat_ms, then `repeat` timed repeats. Runs inside the candidate's process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/runtime/abi.h"
#include "measure/timing_options.h"

namespace kiln::measure::detail {

struct TimingOutcome {
  std::vector<double> repeat_seconds;  // mean seconds per call, one per repeat
  int64_t number = 0;
  int64_t calibration_calls = 0;
  /// Non-zero: kiln_entry returned this during the warm-up or a timed call; timing
  /// stopped there.
  int32_t failed_code = 0;
  /// The candidate was slower than give_up_after_seconds: repeat_seconds holds the
  /// per-call time of the second look (of the warm-up, when it was far past the limit).
  bool gave_up = false;
  /// Seconds of the last untimed pass of `number` calls (calibration or warm-up): what
  /// one repeat is expected to take.
  double pass_seconds = 0;
};

/// Memory a kernel call reads or writes: what TimingOptions::flush_args evicts.
struct MemorySpan {
  const void *data = nullptr;
  size_t bytes = 0;
};

/// Writes back and evicts every cache line of `spans` from all cache levels of every
/// core (clflushopt where the CPU has it, clflush otherwise; `dc civac` on AArch64).
void evict_from_caches(const std::vector<MemorySpan> &spans);

/// The whole protocol: calibrate, then the repeats. `spans`: the call's buffers, for
/// options.flush_args.
TimingOutcome time_kernel(kiln_entry_fn entry, void **args, const TimingOptions &options,
                          const std::vector<MemorySpan> &spans = {});

/// Warm-up and growing `number` only (repeat_seconds stays empty unless gave_up).
TimingOutcome calibrate(kiln_entry_fn entry, void **args, const TimingOptions &options,
                        const std::vector<MemorySpan> &spans = {});

/// One timed pass of `number` calls after a cache flush (when enabled): the mean
/// seconds per call, or nullopt with `failed_code` set when a call returned non-zero.
/// With flush_args, `spans` are evicted before every call and only the calls are timed.
class TimedPasses {
 public:
  explicit TimedPasses(bool flush_cache, bool flush_args = false);
  std::optional<double> seconds_per_call(kiln_entry_fn entry, void **args, int64_t number, int32_t *failed_code,
                                         const std::vector<MemorySpan> &spans = {});

 private:
  void flush();
  std::vector<char> flush_buffer_;
  char round_ = 0;
  bool flush_args_ = false;
};

/// Bytes written to evict the caches: twice the last-level cache, within [16, 256] MiB.
int64_t cache_flush_bytes();

}  // namespace kiln::measure::detail
