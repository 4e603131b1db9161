#include "measure/measurement_lock.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

namespace kiln::measure {
namespace {

using testing::TempDir;

TEST(MeasurementLock, BuildsShareItAndTimingWaitsForThem) {
  TempDir dir;
  MeasurementLock lock(dir.path() / "measure.lock");
  MeasurementLock::Guard build1 = lock.shared();
  MeasurementLock::Guard build2 = lock.shared();  // shared with the first: no wait
  EXPECT_TRUE(build1.held() && build2.held());

  std::atomic<bool> timing{false};
  std::thread timer([&] {
    MeasurementLock::Guard alone = lock.exclusive();
    timing = true;
  });
  // Cannot pass while builds hold the lock (a slow machine only delays the check).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(timing);
  build1 = MeasurementLock::Guard();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(timing);
  build2 = MeasurementLock::Guard();
  timer.join();
  EXPECT_TRUE(timing);
}

TEST(MeasurementLock, AWaitingTimerIsNotOvertakenByNewBuilds) {
  TempDir dir;
  MeasurementLock lock(dir.path() / "measure.lock");
  auto build = std::make_unique<MeasurementLock::Guard>(lock.shared());
  std::atomic<int> order{0};
  std::atomic<int> timer_turn{0}, builder_turn{0};
  std::thread timer([&] {
    MeasurementLock::Guard alone = lock.exclusive();
    timer_turn = ++order;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the timer is queued
  std::thread builder([&] {
    MeasurementLock::Guard shared = lock.shared();
    builder_turn = ++order;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  build.reset();
  timer.join();
  builder.join();
  EXPECT_EQ(timer_turn, 1);
  EXPECT_EQ(builder_turn, 2);
}

TEST(MeasurementLock, AnEmptyPathNeverBlocks) {
  MeasurementLock lock("");
  MeasurementLock::Guard a = lock.exclusive();
  MeasurementLock::Guard b = lock.exclusive();
  EXPECT_FALSE(a.held());
  EXPECT_FALSE(b.held());
}

}  // namespace
}  // namespace kiln::measure
