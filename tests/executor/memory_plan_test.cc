// The activation arena: values whose lifetimes overlap never share bytes, a chain
// reuses two buffers, and random lifetimes keep both properties.
#include "executor/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace kiln::executor {
namespace {

void expect_valid(const std::vector<BufferLifetime> &lifetimes, const MemoryPlan &plan) {
  ASSERT_EQ(plan.offsets.size(), lifetimes.size());
  for (size_t i = 0; i < lifetimes.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % kArenaAlignment, 0);
    EXPECT_LE(plan.offsets[i] + lifetimes[i].bytes, plan.arena_bytes);
    for (size_t j = 0; j < i; ++j) {
      const BufferLifetime &a = lifetimes[i], &b = lifetimes[j];
      bool live_together = a.first <= b.last && b.first <= a.last;
      bool share_bytes = plan.offsets[i] < plan.offsets[j] + b.bytes && plan.offsets[j] < plan.offsets[i] + a.bytes;
      EXPECT_FALSE(live_together && share_bytes) << "values " << i << " and " << j;
    }
  }
  EXPECT_LE(plan.arena_bytes, plan.unplanned_bytes);
}

TEST(MemoryPlan, AChainReusesTwoBuffers) {
  // input -> s0 -> s1 -> s2 -> s3 -> output, every value 1000 bytes.
  std::vector<BufferLifetime> chain = {{1000, -1, 0}, {1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan plan = plan_memory(chain);
  expect_valid(chain, plan);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);
  EXPECT_EQ(plan.unplanned_bytes, 5 * 1024);
}

TEST(MemoryPlan, AStepsOutputNeverSharesItsInputsBytes) {
  // A residual block: x feeds step 0 and step 2; step 2 also reads step 1's output.
  std::vector<BufferLifetime> block = {{4096, -1, 2}, {4096, 0, 1}, {4096, 1, 2}, {4096, 2, 3}};
  MemoryPlan plan = plan_memory(block);
  expect_valid(block, plan);
  EXPECT_EQ(plan.arena_bytes, 3 * 4096);
}

TEST(MemoryPlan, RandomLifetimesNeverOverlapInTimeAndSpace) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> lifetimes;
    int steps = 1 + static_cast<int>(rng() % 30);
    for (int i = 0, n = 1 + static_cast<int>(rng() % 40); i < n; ++i) {
      int first = static_cast<int>(rng() % static_cast<uint64_t>(steps + 1)) - 1;
      int last = first + static_cast<int>(rng() % 6);
      lifetimes.push_back({1 + static_cast<int64_t>(rng() % 5000), first, last});
    }
    expect_valid(lifetimes, plan_memory(lifetimes));
  }
}

}  // namespace
}  // namespace kiln::executor
