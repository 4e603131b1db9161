// The local runner against hand-written artifacts: each bad candidate is classified
// with a readable message, and the same runner measures a good candidate right after.
#include "measure/host_runner.h"
#include "measure/local_runner.h"
#include "target/backend.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

namespace kiln::measure {
namespace {

using testing::describe;
using testing::fixture;
using testing::quick_input;
using testing::TempDir;
using testing::test_runner_options;

// One factory makes this host's runner for any target, by its backend, and refuses a
// target this host cannot measure before it starts anything.
TEST(HostRunner, TheBackendChoosesTheRunnerAndForeignTargetsAreRefused) {
  TempDir dir;
  HostRunnerOptions options;
  options.cpu = test_runner_options(dir);
  std::unique_ptr<Runner> here = make_host_runner(Target::parse("llvm"), options);
  EXPECT_NE(dynamic_cast<LocalRunner *>(here.get()), nullptr);
  try {
    make_host_runner(Target::parse("llvm -mtriple=riscv64-linux-gnu"), options);
    ADD_FAILURE() << "a riscv64 runner was made on this host";
  } catch (const HostCannotMeasure &e) {
    EXPECT_FALSE(e.is_gpu);
    EXPECT_NE(e.why.find("riscv64 CPU"), std::string::npos) << e.why;
  }
  // Under a wrapper (qemu) the server runs the foreign code: the runner is made.
  options.cpu_server_wrapped = true;
  EXPECT_NO_THROW(make_host_runner(Target::parse("llvm -mtriple=riscv64-linux-gnu"), options));
  // A CUDA target needs this host's GPU to be of its arch; without a driver it is refused.
  if (!CudaRunner(options.cuda).why_not(Target::parse("cuda -arch=sm_90")).empty()) {
    try {
      make_host_runner(Target::parse("cuda -arch=sm_90"), options);
      ADD_FAILURE() << "a CUDA runner was made without the GPU";
    } catch (const HostCannotMeasure &e) {
      EXPECT_TRUE(e.is_gpu);
      EXPECT_FALSE(e.why.empty());
    }
  }
}

// Code for another architecture, a GPU or wider vectors than this host's cannot run
// here: the callers of a local runner refuse such targets before building anything.
TEST(LocalRunner, SaysWhichTargetsThisHostCannotRun) {
  auto why_not_here = [](const char *text) {
    Target target = Target::parse(text);
    return target.backend().why_this_host_cannot_run(target);
  };
  EXPECT_EQ(why_not_here("llvm"), "");
  EXPECT_EQ(why_not_here("llvm -mcpu=native -num-cores=1"), "");
  const std::string host_arch = host_triple().substr(0, host_triple().find('-'));
  EXPECT_EQ(why_not_here("llvm -mtriple=riscv64-linux-gnu"), "it is a riscv64 CPU and this host is " + host_arch);
  EXPECT_NE(why_not_here("cuda -arch=sm_90").find("CUDA"), std::string::npos);
  if (host_arch == "x86_64") {
    EXPECT_EQ(why_not_here("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"),
              "it is an aarch64 CPU and this host is x86_64");
    EXPECT_NE(why_not_here("llvm -mtriple=x86_64-apple-darwin -mcpu=znver3").find("another operating system"),
              std::string::npos);
    std::string wide = why_not_here("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
    EXPECT_EQ(wide.empty(), x86_vector_bits(host_cpu()) >= 512) << wide;
    // A matrix instruction the host lacks (its /proc/cpuinfo flags say) would be SIGILL.
    std::string amx = why_not_here("llvm -mcpu=native -mattr=+amx-bf16,+amx-tile");
    EXPECT_EQ(amx.empty(), Target::parse("llvm").has_feature("amx-bf16")) << amx;
  }
}

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
      {"segfault", ErrorKind::kRuntimeError, {"candidate crashed with SIGSEGV after", "correctness check"}},
      {"hang", ErrorKind::kRunTimeout, {"ran longer than the 2 s run timeout"}},
      {"wrong_result",
       ErrorKind::kWrongResult,
       {"output 'C' (param 2) differs from the reference: max abs error", "at index 17", "relative L2 error"}},
      {"out_of_memory", ErrorKind::kRuntimeError, {"crashed with SIGSEGV", "most likely ran out of memory"}},
      {"no_entry", ErrorKind::kLoadError, {"does not export kiln_entry"}},
      {"error_code", ErrorKind::kRuntimeError, {"kiln_entry returned error code 7"}},
      {"does_not_exist", ErrorKind::kLoadError, {"cannot load artifact"}},
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
  EXPECT_EQ(result.error, ErrorKind::kRuntimeError) << describe(result);
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
  EXPECT_EQ(results[0].error, ErrorKind::kRuntimeError);
  EXPECT_EQ(results[1].error, ErrorKind::kNone) << describe(results[1]);
  EXPECT_EQ(results[2].error, ErrorKind::kWrongResult);
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
  EXPECT_EQ(result.error, ErrorKind::kRuntimeError);
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
  EXPECT_EQ(strict.error, ErrorKind::kWrongResult) << describe(strict);
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

// One bad candidate: its kind and the important words of its message, then a good
// candidate on the same runner.
void expect_bad(LocalRunner &runner, const std::string &name, ErrorKind kind,
                const std::vector<std::string> &message_parts) {
  SCOPED_TRACE(name);
  RunResult result = runner.run_one(quick_input(fixture(name), fixture("reference_add")));
  EXPECT_EQ(result.error, kind) << describe(result);
  EXPECT_TRUE(result.repeat_seconds.empty());
  for (const std::string &part : message_parts) {
    EXPECT_NE(result.message.find(part), std::string::npos) << "'" << part << "' not in: " << result.message;
  }
  expect_good(runner, name);
}

TEST(LocalRunner, AnAbortingCandidateIsARuntimeErrorNamingSIGABRT) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  expect_bad(runner, "abort", ErrorKind::kRuntimeError,
             {"candidate crashed with SIGABRT after", "during the correctness check"});
}

TEST(LocalRunner, ACandidateThatExitsCleanlyIsNotASuccess) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  expect_bad(runner, "exit_zero", ErrorKind::kRuntimeError,
             {"candidate exited with code 0", "during the correctness check", "without reporting a result"});
}

TEST(LocalRunner, ACandidateThatWritesItsInputIsAWrongResult) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  expect_bad(runner, "writes_input", ErrorKind::kWrongResult,
             {"input 'A' (param 0) differs from the reference", "at index 5"});
}

TEST(LocalRunner, BadArtifactInfoIsALoadError) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));
  expect_bad(runner, "bad_abi", ErrorKind::kLoadError,
             {"bad_abi.so", "kiln_abi 99", "this runner speaks versions 1 to 2"});
  expect_bad(runner, "bad_info_json", ErrorKind::kLoadError,
             {"bad_info_json.so", "kiln_artifact_info is not valid JSON"});
}

// Child processes of `pid` (every thread's), from /proc.
std::set<pid_t> children_of(pid_t pid) {
  std::set<pid_t> children;
  std::error_code error;
  for (const auto &task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream file(task.path() / "children");
    pid_t child;
    while (file >> child) children.insert(child);
  }
  return children;
}

// The one child of this process that is in `after` but not in `before`.
pid_t new_child(const std::set<pid_t> &before, const std::set<pid_t> &after) {
  std::vector<pid_t> added;
  for (pid_t pid : after) {
    if (before.count(pid) == 0) added.push_back(pid);
  }
  return added.size() == 1 ? added.front() : -1;
}

// SIGKILLs a child of this process and waits until it is dead, without reaping it
// (the runner reaps its own server).
void kill_and_wait(pid_t child) {
  ASSERT_EQ(kill(child, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(info.si_code, CLD_KILLED);
}

// Whether a process is gone (or a zombie, dead but not yet reaped by its new parent).
bool dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t paren = line.rfind(')');
  return paren == std::string::npos || line.compare(paren, 3, ") Z") == 0 || line.compare(paren, 3, ") X") == 0;
}

TEST(LocalRunner, AServerKilledBetweenBatchesIsRestartedForTheNextBatch) {
  TempDir dir;
  std::set<pid_t> before = children_of(getpid());
  LocalRunner runner(test_runner_options(dir));
  pid_t server = new_child(before, children_of(getpid()));
  ASSERT_GT(server, 0) << "cannot find the runner's server among this process's children";
  const std::vector<RunInput> batch = {quick_input(fixture("good_add"), fixture("reference_add")),
                                       quick_input(fixture("wrong_result"), fixture("reference_add")),
                                       quick_input(fixture("good_add"), fixture("reference_add"))};
  auto expect_normal = [&](const std::vector<RunResult> &results, const std::string &when) {
    SCOPED_TRACE(when);
    ASSERT_EQ(results.size(), 3u);
    EXPECT_TRUE(results[0].ok()) << describe(results[0]);
    EXPECT_EQ(results[1].error, ErrorKind::kWrongResult) << describe(results[1]);
    EXPECT_TRUE(results[2].ok()) << describe(results[2]);
  };
  expect_normal(runner.run(batch), "first batch");
  kill_and_wait(server);
  expect_normal(runner.run(batch), "batch after the server was killed");
  // A new server serves it, and the dead one was reaped.
  std::set<pid_t> now = children_of(getpid());
  EXPECT_EQ(now.count(server), 0u);
  pid_t restarted = new_child(before, now);
  EXPECT_GT(restarted, 0);
  EXPECT_NE(restarted, server);
  expect_good(runner, "restart");
}

TEST(LocalRunner, AServerKilledDuringARunFailsThatCandidateAndTheRunnerKeepsWorking) {
  TempDir dir;
  LocalRunnerOptions options = test_runner_options(dir);
  options.run_timeout_seconds = 60;  // the hanging candidate must still be running when the server dies
  std::set<pid_t> before = children_of(getpid());
  LocalRunner runner(options);
  pid_t server = new_child(before, children_of(getpid()));
  ASSERT_GT(server, 0) << "cannot find the runner's server among this process's children";
  // Caches the reference in the server, so its only child below is the candidate.
  expect_good(runner, "start");

  RunResult result;
  auto start = std::chrono::steady_clock::now();
  std::thread run([&] { result = runner.run_one(quick_input(fixture("hang"), fixture("reference_add"))); });
  pid_t candidate = -1;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::set<pid_t> running = children_of(server);
    if (!running.empty()) {
      candidate = *running.begin();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(candidate, 0) << "the candidate never started";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // well inside kiln_entry by now
  // No waiting here: the runner notices at once and reaps its server itself.
  EXPECT_EQ(kill(server, SIGKILL), 0);
  run.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30)) << "the run waited for its timeout";

  EXPECT_EQ(result.error, ErrorKind::kRuntimeError) << describe(result);
  EXPECT_TRUE(result.repeat_seconds.empty());
  for (const std::string part : {"server process died while running", "hang.so"}) {
    EXPECT_NE(result.message.find(part), std::string::npos) << "'" << part << "' not in: " << result.message;
  }
  // The orphaned candidate dies with its server (PR_SET_PDEATHSIG) instead of spinning on.
  if (candidate > 0) {
    auto orphaned = std::chrono::steady_clock::now();
    while (!dead(candidate) && std::chrono::steady_clock::now() - orphaned < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(dead(candidate)) << "candidate " << candidate << " outlived its server";
  }
  EXPECT_EQ(children_of(getpid()).count(server), 0u) << "the killed server was not reaped";
  expect_good(runner, "server killed during a run");
  std::vector<RunResult> batch = runner.run({quick_input(fixture("segfault"), fixture("reference_add")),
                                             quick_input(fixture("good_add"), fixture("reference_add"))});
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].error, ErrorKind::kRuntimeError) << describe(batch[0]);
  EXPECT_TRUE(batch[1].ok()) << describe(batch[1]);
}

}  // namespace
}  // namespace kiln::measure
