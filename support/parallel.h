// parallel_for over independent items on plain std::threads: each worker takes the next
// unclaimed item, so slow items do not stall a fixed partition. Used where a batch of
// programs is analysed or replayed while nothing else runs (feature extraction, the
// search's replays).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::support {

/// Calls `body(i)` for every i in [0, n) on up to `threads` threads (0: one per core);
/// the calls must be independent of each other. An exception thrown by a call stops
/// the workers taking more items and is rethrown here once they have all stopped.
template <typename Body>
void parallel_for(size_t n, int threads, const Body &body) {
  size_t workers = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, n);
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w) pool.emplace_back(work);
  for (std::thread &t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kiln::support
