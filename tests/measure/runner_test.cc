// The local runner against hand-written artifacts: each bad candidate is classified
// with a readable message, and the same runner measures a good candidate right after.
#include "measure/local_runner.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace kiln::measure {
namespace {

using testing::fixture;
using testing::quick_input;
using testing::TempDir;
using testing::test_runner_options;

std::string describe(const RunResult &r) { return std::string(to_string(r.error)) + ": " + r.message; }

void expect_good(LocalRunner &runner, const std::string &after) {
  RunResult good = runner.run_one(quick_input(fixture("good_add"), fixture("reference_add")));
  ASSERT_TRUE(good.ok()) << "after " << after << ": " << describe(good);
  ASSERT_EQ(good.repeat_seconds.size(), 2u);
  for (double t : good.repeat_seconds) EXPECT_GT(t, 0);
  EXPECT_GE(good.number, 1);
}

TEST(LocalRunner, GoodCandidateMatchesTheReferenceAndIsTimed) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  expect_good(runner, "nothing");
}

struct BadCase {
  std::string fixture;
  ErrorKind kind;
  std::vector<std::string> message_parts;
};

TEST(LocalRunner, BadCandidatesAreClassifiedAndTheRunnerKeepsGoing) {
  TempDir dir;
  LocalRunnerOptions options = test_runner_options(dir);
  options.run_timeout_seconds = 2;
  LocalRunner runner(options);
  const std::vector<BadCase> cases = {
      {"segfault", ErrorKind::runtime_error, {"candidate crashed with SIGSEGV after", "correctness check"}},
      {"hang", ErrorKind::run_timeout, {"ran longer than the 2 s run timeout"}},
      {"wrong_result",
       ErrorKind::wrong_result,
       {"output 'C' (param 2) differs from the reference: max abs error", "at index 17", "relative L2 error"}},
      {"out_of_memory", ErrorKind::runtime_error, {"crashed with SIGSEGV", "most likely ran out of memory"}},
      {"no_entry", ErrorKind::load_error, {"does not export kiln_entry"}},
      {"error_code", ErrorKind::runtime_error, {"kiln_entry returned error code 7"}},
      {"does_not_exist", ErrorKind::load_error, {"cannot load artifact"}},
  };
  expect_good(runner, "start");
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.fixture);
    RunResult result = runner.run_one(quick_input(fixture(c.fixture), fixture("reference_add")));
    EXPECT_EQ(result.error, c.kind) << describe(result);
    EXPECT_TRUE(result.repeat_seconds.empty());
    for (const std::string &part : c.message_parts) {
      EXPECT_NE(result.message.find(part), std::string::npos) << "'" << part << "' not in: " << result.message;
    }
    expect_good(runner, c.fixture);
  }
}

TEST(LocalRunner, BuffersTooLargeForTheMemoryLimitAreReportedAsOutOfMemory) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  RunResult result = runner.run_one(quick_input(fixture("huge_buffers"), ""));
  EXPECT_EQ(result.error, ErrorKind::runtime_error) << describe(result);
  EXPECT_NE(result.message.find("ran out of memory"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("memory limit"), std::string::npos) << result.message;
  EXPECT_EQ(result.message.find("exited with code"), std::string::npos) << result.message;
  expect_good(runner, "after huge_buffers");
}

TEST(LocalRunner, BatchesKeepTheirOrder) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  std::vector<RunInput> batch = {quick_input(fixture("segfault"), fixture("reference_add")),
                                 quick_input(fixture("good_add"), fixture("reference_add")),
                                 quick_input(fixture("wrong_result"), fixture("reference_add"))};
  std::vector<RunResult> results = runner.run(batch);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].error, ErrorKind::runtime_error);
  EXPECT_EQ(results[1].error, ErrorKind::none) << describe(results[1]);
  EXPECT_EQ(results[2].error, ErrorKind::wrong_result);
}

TEST(LocalRunner, ArtifactsResolveRuntimeFunctionsAtLoadTime) {
  TempDir dir;
  LocalRunnerOptions options = test_runner_options(dir);
  options.num_threads = 2;
  LocalRunner runner(options);
  RunResult result = runner.run_one(quick_input(fixture("parallel_add"), fixture("reference_add")));
  EXPECT_TRUE(result.ok()) << describe(result);
}

TEST(LocalRunner, WithoutAReferenceOnlyTimes) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  RunResult result = runner.run_one(quick_input(fixture("wrong_result"), ""));
  EXPECT_TRUE(result.ok()) << describe(result);
  EXPECT_EQ(result.repeat_seconds.size(), 2u);
}

TEST(LocalRunner, ABrokenReferenceIsReportedAsSuch) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  RunResult result = runner.run_one(quick_input(fixture("good_add"), fixture("segfault")));
  EXPECT_EQ(result.error, ErrorKind::runtime_error);
  EXPECT_NE(result.message.find("the reference artifact"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("SIGSEGV"), std::string::npos) << result.message;
  // The failure is not cached: a good reference afterwards works.
  expect_good(runner, "broken reference");
}

TEST(LocalRunner, ToleranceDecidesWhatCountsAsEqual) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  // good_add computes a * (b + 1) instead of a * b + a: equal within rounding only.
  RunInput input = quick_input(fixture("good_add"), fixture("reference_add"));
  input.tolerance.rtol = 0;
  input.tolerance.atol = 0;
  RunResult strict = runner.run_one(input);
  EXPECT_EQ(strict.error, ErrorKind::wrong_result) << describe(strict);
  EXPECT_NE(strict.message.find("relative L2 error"), std::string::npos) << strict.message;
}

TEST(LocalRunner, TwoRunnersShareOneMeasurementLock) {
  TempDir dir;
  LocalRunner first(test_runner_options(dir));
  expect_good(first, "start");
  {
    LocalRunner second(test_runner_options(dir));
    expect_good(second, "first runner idle");
  }
  expect_good(first, "second runner gone");
}

}  // namespace
}  // namespace kiln::measure
