#include "executor/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace kiln::executor {
namespace {

int64_t aligned(int64_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool overlap(const BufferLifetime &a, const BufferLifetime &b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferLifetime> &lifetimes) {
  MemoryPlan plan;
  plan.offsets.assign(lifetimes.size(), 0);
  std::vector<size_t> order(lifetimes.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by first use, then index, so the plan is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (lifetimes[a].bytes != lifetimes[b].bytes) return lifetimes[a].bytes > lifetimes[b].bytes;
    return lifetimes[a].first < lifetimes[b].first;
  });
  struct Placed {
    int64_t begin, end;
    size_t index;
  };
  std::vector<Placed> placed;  // sorted by begin
  for (size_t i : order) {
    int64_t size = aligned(std::max<int64_t>(lifetimes[i].bytes, 1));
    plan.unplanned_bytes += size;
    // The lowest gap between live neighbours that fits.
    int64_t offset = 0;
    for (const Placed &p : placed) {
      if (!overlap(lifetimes[p.index], lifetimes[i])) continue;
      if (p.begin >= offset + size) break;
      offset = std::max(offset, p.end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    Placed entry{offset, offset + size, i};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), entry,
                                   [](const Placed &a, const Placed &b) { return a.begin < b.begin; }),
                  entry);
  }
  return plan;
}

}  // namespace kiln::executor
