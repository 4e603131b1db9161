// parallel_for over independent items on plain std::threads: each worker takes the next
// unclaimed item, so slow items do not stall a fixed partition. Used where a batch of
// programs is analysed or replayed while nothing else runs (feature extraction, the
// search's replays).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace kiln::ir {

/// Calls `body(i)` for every i in [0, n) on up to `threads` threads (0: one per core);
/// the calls must be independent of each other.
template <typename Body>
void parallel_for(size_t n, int threads, const Body &body) {
  size_t workers = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) body(i);
  };
  if (workers <= 1) {
    work();
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w) pool.emplace_back(work);
  for (std::thread &t : pool) t.join();
}

}  // namespace kiln::ir
