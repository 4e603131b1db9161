// The timing protocol's knobs (measure/README.md, "Timing protocol", explains each step).
#pragma once

#include <cstdint>

namespace kiln::measure {

struct TimingOptions {
  /// Calls per repeat to start from; raised until one repeat lasts min_repeat_ms.
  int64_t number = 1;
  /// Repeats stored; each gives one mean per-call time. Several short repeats beat one
  /// long one on this noisy host: the spread shows drift, the min/median discount it.
  int repeat = 5;
  /// A repeat shorter than this is dominated by clock and call overhead; `number` grows
  /// until a repeat lasts this long. 0 disables the growth (and its calibration calls).
  double min_repeat_ms = 20;
  /// Upper bound for the grown `number`, so an empty kernel cannot loop for ages.
  int64_t max_number = 1'000'000;
  /// Writes a buffer larger than the last-level cache before every timed pass, so each
  /// repeat starts cold (closer to a kernel inside a model) instead of cache-hot.
  bool flush_cache = false;
  /// Evicts every argument buffer (inputs, packed constants, outputs) from all cache
  /// levels before each call and times each call on its own. Inside a model a kernel's
  /// weights were last read a whole inference ago and arrive from memory; timed hot,
  /// back to back, they sit in the caches, and the search cannot tell a program that
  /// streams them well from one that stalls on them (TVM's enable_cpu_cache_flush).
  bool flush_args = false;
  /// A candidate whose timed warm-up call and a second, warm look (a pass of about an
  /// eighth of min_repeat_ms) both take longer than this (seconds) is clearly slower
  /// than what tuning has: the look is reported as its single repeat and timing stops,
  /// so bad candidates cost two passes instead of a full protocol. A warm-up 8x past
  /// it needs no second look. 0 = always run the full protocol. The tuner sets it from
  /// the best latency known.
  double give_up_after_seconds = 0;
};

}  // namespace kiln::measure
