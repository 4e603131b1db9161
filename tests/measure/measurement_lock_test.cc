#include "measure/measurement_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(MeasurementLock, ALockHeldElsewhereEndsInAnErrorNamingItsHolder) {
  TempDir dir;
  std::filesystem::path path = dir.path() / "measure.lock";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
    flock(fd, LOCK_EX);
    char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  MeasurementLock lock(path, /*wait_limit_seconds=*/0.3);
  try {
    lock.exclusive();
    ADD_FAILURE() << "the lock was taken while another process held it";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("held by pid " + std::to_string(holder)), std::string::npos) << e.what();
  }
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_TRUE(lock.exclusive().held());  // the holder's death released it
}

TEST(MeasurementLock, ALinkPlantedAtTheLockPathIsRefused) {
  TempDir dir;
  std::filesystem::create_symlink(dir.path() / "elsewhere", dir.path() / "measure.lock");
  try {
    // Refused where the lock is made: a runner finds it at start, not at its first timing.
    MeasurementLock lock(dir.path() / "measure.lock");
    ADD_FAILURE() << "the lock followed a symbolic link";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "elsewhere"));
}

TEST(MeasurementLock, TheDefaultLockLivesInADirectoryOnlyThisUserCanUse) {
  std::filesystem::path dir = default_measurement_lock_path().parent_path();
  struct stat st {};
  ASSERT_EQ(lstat(dir.c_str(), &st), 0) << dir;
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_uid, getuid());
  EXPECT_EQ(st.st_mode & 077, 0u) << dir;
}

}  // namespace
}  // namespace kiln::measure
