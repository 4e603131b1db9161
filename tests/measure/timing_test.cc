// The timing protocol, observed through a fixture that counts its calls in a file.
#include <cstdlib>
#include <fstream>
#include <numeric>

#include <gtest/gtest.h>

#include "measure/local_runner.h"
#include "measure/timing.h"
#include "measure/wire_format.h"
#include "test_util.h"

namespace kiln::measure {
namespace {

using testing::fixture;
using testing::TempDir;
using testing::test_runner_options;

int64_t read_count(const std::filesystem::path &path) {
  std::ifstream in(path);
  int64_t count = -1;
  in >> count;
  return count;
}

// The environment is read by the candidate process, forked from the runner's server,
// which is forked when the runner is created: set it before.
class CountingFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    counter_ = dir_.path() / "calls";
    setenv("KILN_TEST_CALL_COUNTER", counter_.c_str(), 1);
    unsetenv("KILN_TEST_CALL_SLEEP_US");
  }
  void TearDown() override {
    unsetenv("KILN_TEST_CALL_COUNTER");
    unsetenv("KILN_TEST_CALL_SLEEP_US");
  }
  RunInput input() const {
    RunInput in;
    in.artifact_path = fixture("counting");
    in.reference_artifact_path = fixture("reference_add");
    in.input_seed = 7;
    return in;
  }
  TempDir dir_;
  std::filesystem::path counter_;
};

TEST_F(CountingFixture, EveryRepeatIsStoredAndOnlyTimedCallsAreTimed) {
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 3;
  in.timing.repeat = 4;
  in.timing.min_repeat_ms = 0;
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.number, 3);
  EXPECT_EQ(result.calibration_calls, 0);
  ASSERT_EQ(result.repeat_seconds.size(), 4u);
  // One correctness check, one warm-up, then repeat * number timed calls.
  EXPECT_EQ(read_count(counter_), 2 + 4 * 3);
  // The check and the warm-up sleep 300 ms each; the timed calls do not. A repeat that
  // included either would average at least 100 ms per call.
  for (double t : result.repeat_seconds) {
    EXPECT_GT(t, 0);
    EXPECT_LT(t, 0.1) << "a slow untimed call leaked into a timed repeat";
  }
}

TEST_F(CountingFixture, NumberGrowsUntilARepeatLastsMinRepeatMs) {
  setenv("KILN_TEST_CALL_SLEEP_US", "1000", 1);
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 1;
  in.timing.repeat = 3;
  in.timing.min_repeat_ms = 20;
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  // Each call sleeps at least 1 ms, so 20 ms need more than one call, yet no more than
  // 20 (plus the 10% aim past the target, doubling at most from below).
  EXPECT_GT(result.number, 1);
  EXPECT_LE(result.number, 40);
  EXPECT_GE(result.calibration_calls, 1);
  ASSERT_EQ(result.repeat_seconds.size(), 3u);
  EXPECT_EQ(read_count(counter_), 2 + result.calibration_calls + 3 * result.number);
  for (double t : result.repeat_seconds) EXPECT_GE(t, 0.001);  // the sleep alone
}

TEST_F(CountingFixture, MaxNumberCapsTheGrowth) {
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 1;
  in.timing.repeat = 2;
  in.timing.min_repeat_ms = 60'000;  // unreachable within max_number calls of a 1 us kernel
  in.timing.max_number = 8;
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.number, 8);
  EXPECT_EQ(read_count(counter_), 2 + result.calibration_calls + 2 * 8);
}

TEST_F(CountingFixture, CacheFlushBetweenRepeatsKeepsTheProtocol) {
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 2;
  in.timing.repeat = 3;
  in.timing.min_repeat_ms = 0;
  in.timing.flush_cache = true;
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.repeat_seconds.size(), 3u);
  EXPECT_EQ(read_count(counter_), 2 + 3 * 2);
}

TEST_F(CountingFixture, EvictingTheBuffersBeforeEveryCallKeepsTheProtocol) {
  RunInput in = input();
  in.timing.number = 2;
  in.timing.repeat = 3;
  in.timing.min_repeat_ms = 0;
  in.timing.flush_args = true;
  for (bool interleaved : {false, true}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "alone");
    LocalRunnerOptions options = test_runner_options(dir_);
    options.interleave_batches = interleaved;
    LocalRunner runner(options);
    std::filesystem::remove(counter_);
    RunResult result = runner.run({in}).at(0);
    ASSERT_TRUE(result.ok()) << result.message;
    ASSERT_EQ(result.repeat_seconds.size(), 3u);
    for (double t : result.repeat_seconds) EXPECT_GT(t, 0);
    EXPECT_EQ(read_count(counter_), 2 + 3 * 2);
  }
}

TEST(TimingWireFormat, TheTimingOptionsReachTheServerProcess) {
  RunInput in;
  in.artifact_path = "a.so";
  in.timing.flush_args = true;
  in.timing.flush_cache = true;
  in.timing.repeat = 7;
  RunInput back = detail::run_input_from_json(detail::to_json(in));
  EXPECT_TRUE(back.timing.flush_args);
  EXPECT_TRUE(back.timing.flush_cache);
  EXPECT_EQ(back.timing.repeat, 7);
  in.timing.flush_args = false;
  EXPECT_FALSE(detail::run_input_from_json(detail::to_json(in)).timing.flush_args);
}

TEST(EvictFromCaches, WritesDirtyLinesBackAndTakesAnySpan) {
  // Unaligned start and length, a span inside another, an empty one and a null one:
  // eviction must write every dirty line back, never drop or touch what lies outside.
  std::vector<uint8_t> bytes(3 * 4096 + 77);
  std::iota(bytes.begin(), bytes.end(), uint8_t{3});
  std::vector<uint8_t> expected = bytes;
  detail::evict_from_caches(
      {{bytes.data() + 5, bytes.size() - 9}, {bytes.data() + 100, 10}, {bytes.data(), 0}, {nullptr, 64}});
  EXPECT_EQ(bytes, expected);
  bytes[4096] = 0;  // written after the eviction, then evicted again
  detail::evict_from_caches({{bytes.data(), bytes.size()}});
  expected[4096] = 0;
  EXPECT_EQ(bytes, expected);
}

TEST_F(CountingFixture, ACandidateSlowerThanTheGiveUpLimitStopsAfterASecondLook) {
  setenv("KILN_TEST_CALL_SLEEP_US", "150000", 1);  // every call after the warm-up: 150 ms
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 2;
  in.timing.repeat = 3;
  in.timing.min_repeat_ms = 0;
  in.timing.give_up_after_seconds = 0.1;  // the fixture's warm-up call sleeps 300 ms
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.number, 1);
  ASSERT_EQ(result.repeat_seconds.size(), 1u);
  // The second, warm look is what is stored, not the cold warm-up.
  EXPECT_GE(result.repeat_seconds[0], 0.15);
  EXPECT_LT(result.repeat_seconds[0], 0.3);
  EXPECT_EQ(read_count(counter_), 3);  // check, warm-up, one second look

  // Under the limit, the full protocol runs.
  in.timing.give_up_after_seconds = 10;
  std::filesystem::remove(counter_);
  result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.repeat_seconds.size(), 3u);
  EXPECT_EQ(read_count(counter_), 2 + 3 * 2);
}

TEST_F(CountingFixture, ASlowColdWarmUpAloneDoesNotGiveUp) {
  // Only the warm-up is slow (300 ms), as a memory-bound kernel's is after the check
  // left the caches cold: the second look is fast, so the full protocol runs.
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 2;
  in.timing.repeat = 3;
  in.timing.min_repeat_ms = 0;
  in.timing.give_up_after_seconds = 0.1;
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.number, 2);
  ASSERT_EQ(result.repeat_seconds.size(), 3u);
  for (double t : result.repeat_seconds) EXPECT_LT(t, 0.1);
  EXPECT_EQ(result.calibration_calls, 1);
  EXPECT_EQ(read_count(counter_), 2 + 1 + 3 * 2);
}

TEST_F(CountingFixture, AWarmUpFarBeyondTheLimitGivesUpWithoutASecondLook) {
  LocalRunner runner(test_runner_options(dir_));
  RunInput in = input();
  in.timing.number = 2;
  in.timing.repeat = 3;
  in.timing.min_repeat_ms = 0;
  in.timing.give_up_after_seconds = 0.01;  // the 300 ms warm-up is 30x past it
  RunResult result = runner.run_one(in);
  ASSERT_TRUE(result.ok()) << result.message;
  EXPECT_EQ(result.number, 1);
  ASSERT_EQ(result.repeat_seconds.size(), 1u);
  EXPECT_GE(result.repeat_seconds[0], 0.3);  // the warm-up call itself
  EXPECT_EQ(read_count(counter_), 2);        // check + warm-up, nothing more
}

}  // namespace
}  // namespace kiln::measure
