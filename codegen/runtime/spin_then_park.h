// Waiting on a 32-bit atomic word: spin briefly, then sleep in the kernel.
//
// Why spin first: generated kernels call parallel_for back to back (one call per
// parallel loop nest, thousands of calls per timing run). A thread that spins for a
// few tens of microseconds sees the next call within nanoseconds; one that went to
// sleep needs a futex wake (a syscall on the waker, a reschedule on the sleeper),
// which costs several microseconds and dominates small kernels.
// Why the spin is bounded: an idle pool must not burn cores that the rest of the
// process (or other processes on a shared machine) could use.
//
// A waiter announces itself in `sleepers` before sleeping, so a waker makes the
// futex syscall only when someone may actually be asleep. The protocol is a Dekker
// handshake and needs sequential consistency on both sides:
//   waker:  store(word) ; if (load(sleepers)) wake(word)
//   waiter: sleepers++  ; if (!done(load(word))) futex_wait(word, seen)
// Either the waiter sees the new word, or the waker sees the sleeper; futex_wait
// itself rechecks the word in the kernel, so no wake-up is lost.

#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::runtime {

/// How long a thread spins before it parks. Long enough to span the gap between two
/// back-to-back parallel loops of a kernel, short enough to be invisible when idle.
inline constexpr std::chrono::microseconds kSpinDuration{100};

/// Tells the core we are in a spin loop: saves power and, on SMT, gives the sibling
/// thread the pipeline.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Sleeps while `word` still holds `seen` (may return spuriously).
inline void futex_wait(std::atomic<uint32_t> &word, uint32_t seen) {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
#else
  word.wait(seen, std::memory_order_seq_cst);
#endif
}

/// Wakes every thread sleeping in futex_wait on `word`.
inline void futex_wake_all(std::atomic<uint32_t> &word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
  word.notify_all();
#endif
}

/// Returns the first value of `word` for which `done(value)` holds, spinning for
/// kSpinDuration and then sleeping. `sleepers` counts threads that may be asleep on
/// `word`; pair with wake_if_sleeping().
template <class Done>
uint32_t spin_then_park(std::atomic<uint32_t> &word, std::atomic<uint32_t> &sleepers, Done done) {
  // Reading the clock costs ~20 ns; look at it only every few dozen pauses.
  constexpr int kPausesPerClockRead = 32;
  const auto deadline = std::chrono::steady_clock::now() + kSpinDuration;
  for (;;) {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      uint32_t value = word.load(std::memory_order_acquire);
      if (done(value)) return value;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  for (;;) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t value = word.load(std::memory_order_seq_cst);
    if (!done(value)) futex_wait(word, value);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    value = word.load(std::memory_order_acquire);
    if (done(value)) return value;
  }
}

/// Call after changing `word` with a seq_cst operation: wakes its waiters, making the
/// syscall only if one may be asleep.
inline void wake_if_sleeping(std::atomic<uint32_t> &word, std::atomic<uint32_t> &sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(word);
}

}  // namespace kiln::runtime
