// Interleaved timing of a batch: candidates are checked and calibrated alone, then their
// repeats run round-robin in one shared process; a candidate that crashes or hangs
// there is blamed alone and the rest are timed again.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "measure/local_runner.h"
#include "test_util.h"

namespace kiln::measure {
namespace {

using testing::describe;
using testing::fixture;
using testing::quick_input;
using testing::TempDir;
using testing::test_runner_options;

// One call per repeat, no calibration: the calls a fixture sees are predictable.
RunInput single_calls(const std::string &artifact, int repeat) {
  RunInput input = quick_input(artifact, fixture("reference_add"));
  input.timing.min_repeat_ms = 0;
  input.timing.repeat = repeat;
  return input;
}

struct JournalLine {
  std::string name;
  std::string pid;
};

std::vector<JournalLine> read_journal(const std::filesystem::path &path) {
  std::ifstream in(path);
  std::vector<JournalLine> lines;
  JournalLine line;
  while (in >> line.name >> line.pid) lines.push_back(line);
  return lines;
}

// Two copies of the journal fixture (a.so, b.so: loaded separately) writing to one
// journal, which the runner's children find through the environment.
struct JournalPair {
  explicit JournalPair(const TempDir &dir)
      : a(dir.path() / "a.so"), b(dir.path() / "b.so"), journal(dir.path() / "journal") {
    std::filesystem::copy_file(fixture("journal"), a);
    std::filesystem::copy_file(fixture("journal"), b);
    setenv("KILN_TEST_JOURNAL", journal.c_str(), 1);  // before the runner forks its server
  }
  ~JournalPair() { unsetenv("KILN_TEST_JOURNAL"); }
  std::filesystem::path a, b, journal;
};

TEST(InterleavedTiming, RepeatsRunRoundRobinInOneProcess) {
  TempDir dir;
  JournalPair pair(dir);
  const std::filesystem::path &a = pair.a, &b = pair.b, &journal = pair.journal;
  LocalRunner runner(test_runner_options(dir));
  std::vector<RunResult> results = runner.run({single_calls(a, 4), single_calls(b, 4)});
  ASSERT_EQ(results.size(), 2u);
  for (const RunResult &r : results) {
    ASSERT_TRUE(r.ok()) << describe(r);
    EXPECT_EQ(r.repeat_seconds.size(), 4u);
  }
  // Each candidate's own process: the check and the warm-up. Then one process times
  // both, round r starting at candidate r mod 2.
  std::vector<JournalLine> lines = read_journal(journal);
  ASSERT_EQ(lines.size(), 12u);
  std::string order;
  for (size_t i = 4; i < lines.size(); ++i) {
    order += lines[i].name.substr(0, 1);
    EXPECT_EQ(lines[i].pid, lines[4].pid) << "line " << i;
  }
  EXPECT_EQ(order, "abbaabba");
  EXPECT_EQ(lines[0].pid, lines[1].pid);
  EXPECT_NE(lines[0].pid, lines[2].pid);
  EXPECT_NE(lines[0].pid, lines[4].pid);
  EXPECT_NE(lines[2].pid, lines[4].pid);
}

TEST(InterleavedTiming, WithoutInterleavingEachCandidateIsTimedAlone) {
  TempDir dir;
  JournalPair pair(dir);
  LocalRunnerOptions options = test_runner_options(dir);
  options.interleave_batches = false;
  LocalRunner runner(options);
  std::vector<RunResult> results = runner.run({single_calls(pair.a, 3), single_calls(pair.b, 3)});
  for (const RunResult &r : results) ASSERT_TRUE(r.ok()) << describe(r);
  std::string order;
  for (const JournalLine &line : read_journal(pair.journal)) order += line.name.substr(0, 1);
  EXPECT_EQ(order, "aaaaabbbbb");  // check, warm-up, three repeats; then the next
}

TEST(InterleavedTiming, ACrashInTheSharedProcessIsBlamedOnItsCandidateAlone) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  std::vector<RunResult> results =
      runner.run({single_calls(fixture("good_add"), 5), single_calls(fixture("crash_third_call"), 5),
                  single_calls(fixture("wrong_result"), 5), single_calls(fixture("parallel_add"), 5)});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].ok()) << describe(results[0]);
  EXPECT_EQ(results[0].repeat_seconds.size(), 5u);
  EXPECT_EQ(results[1].error, ErrorKind::kRuntimeError) << describe(results[1]);
  EXPECT_NE(results[1].message.find("crashed with SIGSEGV"), std::string::npos) << results[1].message;
  EXPECT_NE(results[1].message.find("timed interleaved with its batch"), std::string::npos) << results[1].message;
  EXPECT_EQ(results[2].error, ErrorKind::kWrongResult) << describe(results[2]);
  EXPECT_TRUE(results[3].ok()) << describe(results[3]);
  EXPECT_EQ(results[3].repeat_seconds.size(), 5u);
}

TEST(InterleavedTiming, AHangInTheSharedProcessIsBlamedOnItsCandidateAlone) {
  TempDir dir;
  LocalRunnerOptions options = test_runner_options(dir);
  options.run_timeout_seconds = 1;
  LocalRunner runner(options);
  std::vector<RunResult> results =
      runner.run({single_calls(fixture("hang_third_call"), 3), single_calls(fixture("good_add"), 3)});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].error, ErrorKind::kRunTimeout) << describe(results[0]);
  EXPECT_NE(results[0].message.find("hung while being timed"), std::string::npos) << results[0].message;
  EXPECT_TRUE(results[1].ok()) << describe(results[1]);
  EXPECT_EQ(results[1].repeat_seconds.size(), 3u);
}

TEST(InterleavedTiming, ACandidateThatGivesUpInItsWarmUpKeepsItsOneTiming) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  RunInput slow = quick_input(fixture("good_add"), fixture("reference_add"));
  slow.timing.give_up_after_seconds = 1e-12;  // any call is slower than this
  std::vector<RunResult> results = runner.run({slow, quick_input(fixture("good_add"), fixture("reference_add"))});
  ASSERT_TRUE(results[0].ok()) << describe(results[0]);
  EXPECT_EQ(results[0].repeat_seconds.size(), 1u);  // its second look's calls, not interleaved repeats
  EXPECT_GE(results[0].number, 1);
  ASSERT_TRUE(results[1].ok()) << describe(results[1]);
  EXPECT_EQ(results[1].repeat_seconds.size(), 2u);
}

}  // namespace
}  // namespace kiln::measure
