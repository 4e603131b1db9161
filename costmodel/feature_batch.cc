// Feature extraction of many programs at once, on plain std::threads: each worker
// takes the next unclaimed program, so slow programs do not stall a fixed partition.

#include <algorithm>
#include <atomic>
#include <thread>

#include "costmodel/features.h"

namespace kiln::costmodel {

std::vector<ProgramFeatures> extract_features_batch(const std::vector<ir::PrimFunc> &programs, int threads) {
  std::vector<ProgramFeatures> results(programs.size());
  size_t workers = threads > 0 ? static_cast<size_t>(threads) : std::max(1u, std::thread::hardware_concurrency());
  workers = std::min(workers, programs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < programs.size(); i = next++) results[i] = extract_features(programs[i]);
  };
  if (workers <= 1) {
    work();
    return results;
  }
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w) pool.emplace_back(work);
  for (std::thread &t : pool) t.join();
  return results;
}

}  // namespace kiln::costmodel
