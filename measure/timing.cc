#include "measure/timing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

namespace kiln::measure::detail {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: immune to wall-clock steps
static_assert(Clock::is_steady);

int64_t cache_flush_bytes() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  // Clamped: some hosts report the whole socket's L3 (256 MiB on this VM), and writing
  // twice that before every repeat would cost more than most kernels being timed.
  return std::clamp<int64_t>(int64_t{2} * std::max<long>(llc, 0), int64_t{16} << 20, int64_t{256} << 20);
}

namespace {

class CacheFlusher {
 public:
  explicit CacheFlusher(bool enabled) {
    if (enabled) buffer_.resize(static_cast<size_t>(cache_flush_bytes()));
  }
  void flush() {
    if (buffer_.empty()) return;
    // Writing (not just reading) also evicts dirty lines the kernel left behind.
    std::memset(buffer_.data(), ++round_, buffer_.size());
    // Keep the stores: the compiler must assume the volatile read observes them.
    volatile char sink = buffer_[buffer_.size() / 2];
    (void)sink;
  }

 private:
  std::vector<char> buffer_;
  char round_ = 0;
};

struct Pass {
  double seconds = 0;
  int32_t code = 0;
};

Pass timed_pass(kiln_entry_fn entry, void **args, int64_t number) {
  int32_t code = 0;
  Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < number; ++i) code |= entry(args);
  Clock::time_point end = Clock::now();
  return {std::chrono::duration<double>(end - start).count(), code};
}

}  // namespace

TimingOutcome time_kernel(kiln_entry_fn entry, void **args, const TimingOptions &options) {
  TimingOutcome outcome;
  CacheFlusher flusher(options.flush_cache);

  // Warm-up: first-touch page faults, lazy symbol binding, thread-pool start. Timed
  // only to give up early on a candidate that is already far too slow.
  flusher.flush();
  Pass warm_up = timed_pass(entry, args, 1);
  if (warm_up.code != 0) {
    outcome.failed_code = warm_up.code;
    return outcome;
  }
  if (options.give_up_after_seconds > 0 && warm_up.seconds > options.give_up_after_seconds) {
    outcome.number = 1;
    outcome.repeat_seconds.push_back(warm_up.seconds);
    outcome.gave_up = true;
    return outcome;
  }

  int64_t number = std::max<int64_t>(options.number, 1);
  int64_t max_number = std::max(options.max_number, number);
  if (options.min_repeat_ms > 0) {
    double target = options.min_repeat_ms / 1000.0;
    for (;;) {
      flusher.flush();
      Pass pass = timed_pass(entry, args, number);
      outcome.calibration_calls += number;
      if (pass.code != 0) {
        outcome.failed_code = pass.code;
        return outcome;
      }
      if (pass.seconds >= target || number >= max_number) break;
      // Aim 10% past the target from the measured rate, but at least double, so a pass
      // that read 0 s (a coarse clock) still converges in few steps.
      double scale = pass.seconds > 0 ? 1.1 * target / pass.seconds : 1e9;
      double grown = std::ceil(static_cast<double>(number) * std::max(2.0, scale));
      number = std::min<int64_t>(max_number, grown > 1e18 ? max_number : static_cast<int64_t>(grown));
    }
  }
  outcome.number = number;

  for (int r = 0; r < std::max(options.repeat, 1); ++r) {
    flusher.flush();
    Pass pass = timed_pass(entry, args, number);
    if (pass.code != 0) {
      outcome.failed_code = pass.code;
      return outcome;
    }
    outcome.repeat_seconds.push_back(pass.seconds / static_cast<double>(number));
  }
  return outcome;
}

}  // namespace kiln::measure::detail
