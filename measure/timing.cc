#include "measure/timing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kiln::measure::detail {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: immune to wall-clock steps
static_assert(Clock::is_steady);

// A warm-up call this many times past give_up_after_seconds is given up on without a
// second look: cold caches and a sleeping thread pool cost a memory-bound kernel 3-4x,
// not 8x, and a second call of a candidate that slow is what giving up saves.
constexpr double kColdCallSlack = 8;

int64_t cache_flush_bytes() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  // Clamped: some hosts report the whole socket's L3 (256 MiB on this VM), and writing
  // twice that before every repeat would cost more than most kernels being timed.
  return std::clamp<int64_t>(int64_t{2} * std::max<long>(llc, 0), int64_t{16} << 20, int64_t{256} << 20);
}

namespace {

// 64 bytes on every x86 and AArch64 core Kiln targets; a CPU with longer lines only
// sees some lines flushed twice.
constexpr uintptr_t kCacheLine = 64;

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("clflushopt"))) void clflushopt_lines(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = begin; line < end; line += kCacheLine) _mm_clflushopt(reinterpret_cast<void *>(line));
}
void clflush_lines(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = begin; line < end; line += kCacheLine) _mm_clflush(reinterpret_cast<void *>(line));
}
// CPUID leaf 7, EBX bit 23 (__builtin_cpu_supports does not know it in every compiler).
bool cpu_has_clflushopt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1u << 23)) != 0;
}
#endif

}  // namespace

void evict_from_caches(const std::vector<MemorySpan> &spans) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has_clflushopt = cpu_has_clflushopt();
#endif
  for (const MemorySpan &span : spans) {
    if (span.data == nullptr || span.bytes == 0) continue;
    uintptr_t begin = reinterpret_cast<uintptr_t>(span.data) & ~(kCacheLine - 1);
    uintptr_t end = reinterpret_cast<uintptr_t>(span.data) + span.bytes;
#if defined(__x86_64__) || defined(__i386__)
    if (has_clflushopt)
      clflushopt_lines(begin, end);
    else
      clflush_lines(begin, end);
#elif defined(__aarch64__)
    for (uintptr_t line = begin; line < end; line += kCacheLine) asm volatile("dc civac, %0" ::"r"(line) : "memory");
#endif
  }
  // The flushes are weakly ordered: the kernel's first loads must not overtake them.
#if defined(__x86_64__) || defined(__i386__)
  _mm_mfence();
#elif defined(__aarch64__)
  asm volatile("dsb ish" ::: "memory");
#endif
}

namespace {

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

// Each call timed alone, after its buffers were evicted; the evictions are not timed.
Pass timed_cold_calls(kiln_entry_fn entry, void **args, int64_t number, const std::vector<MemorySpan> &spans) {
  int32_t code = 0;
  Clock::duration timed{0};
  for (int64_t i = 0; i < number; ++i) {
    evict_from_caches(spans);
    Clock::time_point start = Clock::now();
    code |= entry(args);
    timed += Clock::now() - start;
  }
  return {std::chrono::duration<double>(timed).count(), code};
}

}  // namespace

TimedPasses::TimedPasses(bool flush_cache, bool flush_args) : flush_args_(flush_args) {
  if (flush_cache) flush_buffer_.resize(static_cast<size_t>(cache_flush_bytes()));
}

void TimedPasses::flush() {
  if (flush_buffer_.empty()) return;
  // Writing (not just reading) also evicts dirty lines the kernel left behind.
  std::memset(flush_buffer_.data(), ++round_, flush_buffer_.size());
  // Keep the stores: the compiler must assume the volatile read observes them.
  volatile char sink = flush_buffer_[flush_buffer_.size() / 2];
  (void)sink;
}

std::optional<double> TimedPasses::seconds_per_call(kiln_entry_fn entry, void **args, int64_t number,
                                                    int32_t *failed_code, const std::vector<MemorySpan> &spans) {
  flush();
  Pass pass = flush_args_ ? timed_cold_calls(entry, args, number, spans) : timed_pass(entry, args, number);
  if (pass.code != 0) {
    *failed_code = pass.code;
    return std::nullopt;
  }
  return pass.seconds / static_cast<double>(number);
}

TimingOutcome calibrate(kiln_entry_fn entry, void **args, const TimingOptions &options,
                        const std::vector<MemorySpan> &spans) {
  TimingOutcome outcome;
  TimedPasses passes(options.flush_cache, options.flush_args);

  int64_t number = std::max<int64_t>(options.number, 1);
  int64_t max_number = std::max(options.max_number, number);
  double target = options.min_repeat_ms / 1000.0;
  // A probe pass of an eighth of the target already gives the rate to within a few
  // percent: `number` is extrapolated from it, without a full-length pass that would
  // be thrown away (one per candidate, about a sixth of what timing a batch costs).
  double probe = target / 8;

  // Warm-up: first-touch page faults, lazy symbol binding, thread-pool start. Timed
  // only to give up early on a candidate that is already far too slow.
  std::optional<double> warm_up = passes.seconds_per_call(entry, args, 1, &outcome.failed_code, spans);
  if (!warm_up) return outcome;
  outcome.pass_seconds = *warm_up;
  const double limit = options.give_up_after_seconds;
  if (limit > 0 && *warm_up > limit) {
    // The warm-up runs on caches the correctness check left cold and wakes the thread
    // pool: a memory-bound kernel that streams an 8 MB weight in 0.06 ms warm took
    // 0.2-0.25 ms in it. Giving up on that call alone stored such candidates 3-4x too
    // slow and dropped them. Unless the call was far beyond the limit (and not cheap), a
    // second, warm look of about one probe decides.
    double per_call = *warm_up;
    int64_t looked = 1;
    if (*warm_up <= kColdCallSlack * limit || *warm_up <= probe) {
      looked = std::clamp<int64_t>(static_cast<int64_t>(probe / *warm_up), 1, max_number);
      std::optional<double> again = passes.seconds_per_call(entry, args, looked, &outcome.failed_code, spans);
      if (!again) return outcome;
      outcome.calibration_calls += looked;
      outcome.pass_seconds = *again * static_cast<double>(looked);
      per_call = *again;
    }
    if (per_call > limit) {
      outcome.number = looked;
      outcome.repeat_seconds.push_back(per_call);
      outcome.gave_up = true;
      return outcome;
    }
    number = std::max(number, looked);
  }

  if (options.min_repeat_ms > 0) {
    for (;;) {
      std::optional<double> per_call = passes.seconds_per_call(entry, args, number, &outcome.failed_code, spans);
      outcome.calibration_calls += number;
      if (!per_call) return outcome;
      double seconds = *per_call * static_cast<double>(number);
      outcome.pass_seconds = seconds;
      if (seconds >= target || number >= max_number) break;
      // Aim 10% past the target (or, while still probing, past a quarter of it) from
      // the measured rate; a probe grows at least twofold, so a pass that read 0 s (a
      // coarse clock) still converges in few steps.
      bool rate_known = seconds >= probe;
      double aim = rate_known ? 1.1 * target : 1.1 * target / 4;
      double scale = seconds > 0 ? aim / seconds : 1e9;
      double grown =
          std::ceil(static_cast<double>(number) * (rate_known ? std::max(1.0, scale) : std::max(2.0, scale)));
      number = std::min<int64_t>(max_number, grown > 1e18 ? max_number : static_cast<int64_t>(grown));
      if (rate_known) {
        outcome.pass_seconds = *per_call * static_cast<double>(number);
        break;
      }
    }
  }
  outcome.number = number;
  return outcome;
}

TimingOutcome time_kernel(kiln_entry_fn entry, void **args, const TimingOptions &options,
                          const std::vector<MemorySpan> &spans) {
  TimingOutcome outcome = calibrate(entry, args, options, spans);
  if (outcome.failed_code != 0 || outcome.gave_up) return outcome;
  TimedPasses passes(options.flush_cache, options.flush_args);
  for (int r = 0; r < std::max(options.repeat, 1); ++r) {
    std::optional<double> per_call = passes.seconds_per_call(entry, args, outcome.number, &outcome.failed_code, spans);
    if (!per_call) return outcome;
    outcome.repeat_seconds.push_back(*per_call);
  }
  return outcome;
}

}  // namespace kiln::measure::detail
