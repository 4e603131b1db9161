#include "support/parallel.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace kiln::support {
namespace {

TEST(ParallelFor, EveryItemRunsOnceForAnyThreadCount) {
  for (int threads : {0, 1, 2, 7}) {
    std::vector<int> runs(1000, 0);
    parallel_for(runs.size(), threads, [&](size_t i) { runs[i] += static_cast<int>(i) + 1; });
    for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i], static_cast<int>(i) + 1) << "threads " << threads;
  }
  parallel_for(0, 4, [](size_t) { FAIL() << "no items, no calls"; });
}

TEST(ParallelFor, AnExceptionReachesTheCaller) {
  for (int threads : {1, 3}) {
    EXPECT_THROW(parallel_for(100, threads,
                              [](size_t i) {
                                if (i == 42) throw std::runtime_error("item 42");
                              }),
                 std::runtime_error)
        << "threads " << threads;
  }
}

}  // namespace
}  // namespace kiln::support
