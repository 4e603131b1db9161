// Tests of libkiln_runtime through its C ABI only (codegen/runtime/abi.h), the way generated
// kernels use it. No assertion depends on timing: where a test needs several threads
// to be inside tasks at once it waits for them with a generous bound, and a missing
// thread shows up as a failed task, never as a hang.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "codegen/runtime/abi.h"

namespace {

constexpr auto kRendezvousBound = std::chrono::seconds(60);

// Waits until `counter` reaches `target`; false if that took implausibly long.
bool wait_for(const std::atomic<int64_t> &counter, int64_t target) {
  const auto deadline = std::chrono::steady_clock::now() + kRendezvousBound;
  while (counter.load() < target) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Restores the thread count every test found, whatever the test set.
class Runtime : public ::testing::Test {
 protected:
  void SetUp() override { saved_threads_ = kiln_rt_num_threads(); }
  void TearDown() override { kiln_rt_set_num_threads(saved_threads_); }

 private:
  int32_t saved_threads_ = 1;
};

// Busy work, so that helpers have time to join a call (with empty tasks the caller
// often finishes everything before a helper wakes, and withdraws its offer).
void busy_work(int iterations) {
  volatile unsigned sink = 0;  // unsigned: the sum wraps, by design
  for (int i = 0; i < iterations; ++i) sink = sink + static_cast<unsigned>(i);
}

// Per task: how often it ran, and whether it saw the expected task count.
struct TaskCounts {
  explicit TaskCounts(int64_t n, int work = 0) : runs(static_cast<size_t>(n)), expected_num_tasks(n), work(work) {}
  std::vector<std::atomic<int>> runs;
  int64_t expected_num_tasks;
  int work;
  std::atomic<int> wrong_num_tasks{0};
};

int32_t count_task(int64_t task, int64_t num_tasks, void *closure) {
  auto &counts = *static_cast<TaskCounts *>(closure);
  if (num_tasks != counts.expected_num_tasks || task < 0 || task >= num_tasks) {
    counts.wrong_num_tasks.fetch_add(1);
    return 1;
  }
  busy_work(counts.work);
  counts.runs[static_cast<size_t>(task)].fetch_add(1);
  return 0;
}

TEST_F(Runtime, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    kiln_rt_set_num_threads(threads);
    ASSERT_EQ(kiln_rt_num_threads(), threads);
    for (int64_t n : {-3, 0, 1, 2, 3, 7, 8, 9, 64, 1000}) {
      for (int work : {0, 20000}) {
        const int64_t effective = n <= 0 ? threads : n;  // n <= 0: one task per thread
        TaskCounts counts(effective, work);
        ASSERT_EQ(kiln_rt_parallel_for(n, count_task, &counts), 0) << "threads " << threads << " n " << n;
        EXPECT_EQ(counts.wrong_num_tasks.load(), 0) << "threads " << threads << " n " << n;
        for (int64_t t = 0; t < effective; ++t)
          ASSERT_EQ(counts.runs[static_cast<size_t>(t)].load(), 1)
              << "task " << t << " threads " << threads << " n " << n << " work " << work;
      }
    }
  }
}

TEST_F(Runtime, CallerRunsTaskZero) {
  kiln_rt_set_num_threads(2);
  struct Seen {
    std::atomic<std::thread::id> task_zero_thread;
  } seen;
  auto record = [](int64_t task, int64_t, void *closure) -> int32_t {
    if (task == 0) static_cast<Seen *>(closure)->task_zero_thread.store(std::this_thread::get_id());
    return 0;
  };
  for (int i = 0; i < 100; ++i) {
    seen.task_zero_thread.store(std::thread::id());
    ASSERT_EQ(kiln_rt_parallel_for(16, record, &seen), 0);
    ASSERT_EQ(seen.task_zero_thread.load(), std::this_thread::get_id());
  }
}

// Task 0 (the caller's) finishes only after every other task has: possible only if
// the helpers claim work dynamically instead of receiving a fixed share.
TEST_F(Runtime, TasksAreClaimedDynamically) {
  kiln_rt_set_num_threads(2);
  struct State {
    int64_t num_tasks = 50;
    std::atomic<int64_t> others_done{0};
  } state;
  auto task = [](int64_t task, int64_t num_tasks, void *closure) -> int32_t {
    auto &s = *static_cast<State *>(closure);
    if (task != 0) {
      s.others_done.fetch_add(1);
      return 0;
    }
    return wait_for(s.others_done, num_tasks - 1) ? 0 : 1;
  };
  EXPECT_EQ(kiln_rt_parallel_for(state.num_tasks, task, &state), 0);
  EXPECT_EQ(state.others_done.load(), state.num_tasks - 1);
}

// n tasks on n threads that each wait for all n to start: each must run on its own
// thread, so the set of thread ids shows how many threads the pool really uses.
struct Rendezvous {
  std::atomic<int64_t> started{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
};

int32_t rendezvous_task(int64_t, int64_t num_tasks, void *closure) {
  auto &r = *static_cast<Rendezvous *>(closure);
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.threads.insert(std::this_thread::get_id());
  }
  r.started.fetch_add(1);
  return wait_for(r.started, num_tasks) ? 0 : 1;
}

size_t threads_used(int64_t num_tasks) {
  Rendezvous r;
  if (kiln_rt_parallel_for(num_tasks, rendezvous_task, &r) != 0) return 0;
  return r.threads.size();
}

TEST_F(Runtime, SetNumThreadsChangesWorkerCount) {
  for (int threads : {4, 2, 3, 1, 6, 2}) {
    kiln_rt_set_num_threads(threads);
    EXPECT_EQ(kiln_rt_num_threads(), threads);
    EXPECT_EQ(threads_used(0), static_cast<size_t>(threads)) << "threads " << threads;
  }
  kiln_rt_set_num_threads(0);  // below the minimum: clamped
  EXPECT_EQ(kiln_rt_num_threads(), 1);
  kiln_rt_set_num_threads(-5);
  EXPECT_EQ(kiln_rt_num_threads(), 1);
}

TEST_F(Runtime, FewerTasksThanThreadsUseFewerThreads) {
  kiln_rt_set_num_threads(4);
  EXPECT_EQ(threads_used(2), 2u);
  EXPECT_EQ(threads_used(3), 3u);
}

TEST_F(Runtime, SetNumThreadsInsideATaskTakesEffectNextCall) {
  kiln_rt_set_num_threads(2);
  auto shrink = [](int64_t task, int64_t, void *) -> int32_t {
    if (task == 1) kiln_rt_set_num_threads(3);
    return 0;
  };
  ASSERT_EQ(kiln_rt_parallel_for(4, shrink, nullptr), 0);
  EXPECT_EQ(kiln_rt_num_threads(), 3);
  EXPECT_EQ(threads_used(0), 3u);
}

constexpr int64_t kOuter = 9, kInner = 5;

struct NestedRuns {
  std::atomic<int> runs[kOuter][kInner] = {};
  std::atomic<int> wrong_thread{0};
};

struct InnerLoop {
  NestedRuns *state;
  int64_t outer;
  std::thread::id thread;
};

int32_t inner_task(int64_t task, int64_t, void *closure) {
  auto &inner = *static_cast<InnerLoop *>(closure);
  if (std::this_thread::get_id() != inner.thread) inner.state->wrong_thread.fetch_add(1);
  inner.state->runs[inner.outer][task].fetch_add(1);
  return 0;
}

int32_t outer_task(int64_t task, int64_t, void *closure) {
  InnerLoop inner{static_cast<NestedRuns *>(closure), task, std::this_thread::get_id()};
  return kiln_rt_parallel_for(kInner, inner_task, &inner);
}

TEST_F(Runtime, NestedCallsRunSeriallyInTheCallingThread) {
  for (int threads : {1, 2, 4}) {
    kiln_rt_set_num_threads(threads);
    NestedRuns state;
    ASSERT_EQ(kiln_rt_parallel_for(kOuter, outer_task, &state), 0);
    EXPECT_EQ(state.wrong_thread.load(), 0);
    for (int64_t o = 0; o < kOuter; ++o)
      for (int64_t i = 0; i < kInner; ++i) ASSERT_EQ(state.runs[o][i].load(), 1) << o << "," << i;
  }
}

// A task that fails with `code` when its index is listed in `failing`.
struct Failures {
  std::vector<std::pair<int64_t, int32_t>> failing;
  std::vector<std::atomic<int>> runs;
  explicit Failures(int64_t n) : runs(static_cast<size_t>(n)) {}
};

int32_t maybe_fail(int64_t task, int64_t, void *closure) {
  auto &f = *static_cast<Failures *>(closure);
  f.runs[static_cast<size_t>(task)].fetch_add(1);
  for (auto [index, code] : f.failing)
    if (index == task) return code;
  return 0;
}

TEST_F(Runtime, ResultIsThatOfTheLowestFailingTask) {
  for (int threads : {1, 2, 4}) {
    kiln_rt_set_num_threads(threads);
    for (int repeat = 0; repeat < 200; ++repeat) {
      Failures f(100);
      f.failing = {{40, 7}, {10, 3}, {90, 5}};
      ASSERT_EQ(kiln_rt_parallel_for(100, maybe_fail, &f), 3) << "threads " << threads;
      // Claims are in order: everything up to the lowest failure ran, once.
      for (int64_t t = 0; t <= 10; ++t) ASSERT_EQ(f.runs[static_cast<size_t>(t)].load(), 1) << t;
      for (int64_t t = 11; t < 100; ++t) ASSERT_LE(f.runs[static_cast<size_t>(t)].load(), 1) << t;
    }
    Failures first(8);
    first.failing = {{0, -2}};
    EXPECT_EQ(kiln_rt_parallel_for(8, maybe_fail, &first), -2);
    Failures last(8);
    last.failing = {{7, 11}};
    EXPECT_EQ(kiln_rt_parallel_for(8, maybe_fail, &last), 11);
    Failures none(8);
    EXPECT_EQ(kiln_rt_parallel_for(8, maybe_fail, &none), 0);
  }
}

TEST_F(Runtime, NestedFailurePropagates) {
  kiln_rt_set_num_threads(2);
  auto inner = [](int64_t task, int64_t, void *) -> int32_t { return task == 2 ? 42 : 0; };
  auto outer = [](int64_t task, int64_t, void *closure) -> int32_t {
    if (task != 3) return 0;
    return kiln_rt_parallel_for(4, *static_cast<kiln_task_fn *>(closure), nullptr);
  };
  kiln_task_fn inner_fn = inner;
  EXPECT_EQ(kiln_rt_parallel_for(6, outer, &inner_fn), 42);
}

TEST_F(Runtime, NullFunctionIsAnError) { EXPECT_NE(kiln_rt_parallel_for(4, nullptr, nullptr), 0); }

TEST_F(Runtime, StressBackToBackCalls) {
  kiln_rt_set_num_threads(2);
  std::atomic<int64_t> total{0};
  auto add = [](int64_t task, int64_t, void *closure) -> int32_t {
    static_cast<std::atomic<int64_t> *>(closure)->fetch_add(task + 1, std::memory_order_relaxed);
    return 0;
  };
  int64_t expected = 0;
  for (int call = 0; call < 100000; ++call) {
    const int64_t n = 1 + call % 5;  // 1..5 tasks: serial, fewer and more than threads
    ASSERT_EQ(kiln_rt_parallel_for(n, add, &total), 0);
    expected += n * (n + 1) / 2;
  }
  EXPECT_EQ(total.load(), expected);
}

// Tasks long enough (about a microsecond) that helpers join most calls, so offers
// are taken, withdrawn and raced for in every combination.
TEST_F(Runtime, StressCallsWithWork) {
  kiln_rt_set_num_threads(2);
  std::atomic<int64_t> total{0};
  auto add = [](int64_t task, int64_t, void *closure) -> int32_t {
    busy_work(static_cast<int>(task % 3) * 500);
    static_cast<std::atomic<int64_t> *>(closure)->fetch_add(task + 1, std::memory_order_relaxed);
    return 0;
  };
  int64_t expected = 0;
  for (int call = 0; call < 20000; ++call) {
    const int64_t n = 2 + call % 7;
    ASSERT_EQ(kiln_rt_parallel_for(n, add, &total), 0);
    expected += n * (n + 1) / 2;
  }
  EXPECT_EQ(total.load(), expected);
}

// Gaps longer than the spin make the workers and the caller sleep on the futex and
// be woken: the slow path must be as correct as the fast one.
TEST_F(Runtime, CallsAfterIdleGapsWakeParkedWorkers) {
  kiln_rt_set_num_threads(2);
  for (int call = 0; call < 30; ++call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(threads_used(2), 2u) << "call " << call;
    TaskCounts counts(7);
    ASSERT_EQ(kiln_rt_parallel_for(7, count_task, &counts), 0);
    for (auto &runs : counts.runs) ASSERT_EQ(runs.load(), 1);
  }
}

// A task that outlasts the caller's spin makes the caller park until the helper ends.
TEST_F(Runtime, CallerWaitsForALongHelperTask) {
  kiln_rt_set_num_threads(2);
  std::atomic<int64_t> finished{0};
  auto task = [](int64_t task, int64_t, void *closure) -> int32_t {
    if (task == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    static_cast<std::atomic<int64_t> *>(closure)->fetch_add(1);
    return 0;
  };
  for (int i = 0; i < 5; ++i) {
    finished = 0;
    ASSERT_EQ(kiln_rt_parallel_for(2, task, &finished), 0);
    EXPECT_EQ(finished.load(), 2);  // nothing may still run when the call returns
  }
}

// Workers made by a caller pinned to one CPU inherit that pin, so the helper starts
// on the caller's CPU: the state the scheduler can leave a spinning helper in for
// seconds. Once it joins a job there it must move to a free CPU of the process mask
// and run its task beside the caller's, not time-sliced with it.
TEST_F(Runtime, HelperOnTheCallersCpuMovesToAFreeOne) {
  cpu_set_t process_mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(process_mask), &process_mask), 0);
  if (CPU_COUNT(&process_mask) < 2) GTEST_SKIP() << "needs 2 CPUs";
  kiln_rt_set_num_threads(2);  // the pool exists and knows the whole mask
  ASSERT_EQ(kiln_rt_parallel_for(
                2, [](int64_t, int64_t, void *) -> int32_t { return 0; }, nullptr),
            0);
  int caller_cpu = sched_getcpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(caller_cpu, &one);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
  kiln_rt_set_num_threads(1);  // joins the helper
  kiln_rt_set_num_threads(2);  // a new one, created here: pinned to caller_cpu too

  struct Seen {
    std::atomic<int64_t> started{0};
    std::atomic<int> cpu[2] = {-1, -1};
    std::atomic<bool> together{false};
  } seen;
  auto task = [](int64_t task, int64_t, void *closure) -> int32_t {
    auto *s = static_cast<Seen *>(closure);
    s->cpu[task] = sched_getcpu();
    s->started.fetch_add(1);
    if (!wait_for(s->started, 2)) return 1;
    s->together = true;
    busy_work(1000000);
    return 0;
  };
  int32_t result = kiln_rt_parallel_for(2, task, &seen);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(process_mask), &process_mask), 0);
  ASSERT_EQ(result, 0);
  EXPECT_TRUE(seen.together.load());
  EXPECT_EQ(seen.cpu[0].load(), caller_cpu);
  EXPECT_NE(seen.cpu[1].load(), caller_cpu);
  EXPECT_NE(seen.cpu[1].load(), -1);
}

TEST_F(Runtime, ConcurrentExternalCallers) {
  kiln_rt_set_num_threads(2);
  constexpr int kCalls = 5000;
  struct Caller {
    std::atomic<int64_t> total{0};
    int failures = 0;
  };
  auto add = [](int64_t task, int64_t, void *closure) -> int32_t {
    static_cast<Caller *>(closure)->total.fetch_add(task + 1);
    return 0;
  };
  Caller callers[3];
  std::vector<std::thread> threads;
  for (int c = 0; c < 3; ++c) {
    threads.emplace_back([&callers, add, c] {
      for (int call = 0; call < kCalls; ++call)
        if (kiln_rt_parallel_for(6 + c, add, &callers[c]) != 0) ++callers[c].failures;
    });
  }
  for (auto &t : threads) t.join();
  for (int c = 0; c < 3; ++c) {
    const int64_t n = 6 + c;
    EXPECT_EQ(callers[c].failures, 0);
    EXPECT_EQ(callers[c].total.load(), kCalls * n * (n + 1) / 2) << "caller " << c;
  }
}

TEST_F(Runtime, ForkedChildGetsAWorkingPool) {
  kiln_rt_set_num_threads(2);
  ASSERT_EQ(threads_used(2), 2u);  // the parent's workers exist now
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(60);  // a hang in the child becomes a signal, not a stuck test
    bool ok = kiln_rt_num_threads() == 2 && threads_used(2) == 2;
    TaskCounts counts(100);
    ok = ok && kiln_rt_parallel_for(100, count_task, &counts) == 0;
    for (auto &runs : counts.runs) ok = ok && runs.load() == 1;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child ended by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(threads_used(2), 2u);  // and the parent's pool still works
}

TEST(Workspace, IsAlignedAndWritable) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{1} << 20}) {
    void *ptr = kiln_rt_alloc_workspace(bytes);
    ASSERT_NE(ptr, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 64, 0u) << bytes;
    std::memset(ptr, 0xab, bytes);
    kiln_rt_free_workspace(ptr);
  }
  kiln_rt_free_workspace(nullptr);
}

// A freed block is handed out again for an allocation of the same (rounded) size, so
// a kernel's scratch buffers are not mapped afresh on every call.
TEST(Workspace, FreedBlocksAreReusedForTheSameSize) {
  void *a = kiln_rt_alloc_workspace(100000);
  void *b = kiln_rt_alloc_workspace(100000);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  kiln_rt_free_workspace(a);
  EXPECT_EQ(kiln_rt_alloc_workspace(100001), a);  // both round up to 100032 bytes
  void *other = kiln_rt_alloc_workspace(200000);  // a different size: a new block
  EXPECT_NE(other, a);
  EXPECT_NE(other, b);
  for (void *p : {a, b, other}) kiln_rt_free_workspace(p);
  EXPECT_EQ(kiln_rt_alloc_workspace(SIZE_MAX), nullptr);
}

TEST(Workspace, AllocationsFromManyTasks) {
  auto task = [](int64_t task, int64_t, void *) -> int32_t {
    auto *ptr = static_cast<unsigned char *>(kiln_rt_alloc_workspace(4096 + static_cast<size_t>(task)));
    if (ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % 64 != 0) return 1;
    ptr[0] = ptr[4095] = 1;
    kiln_rt_free_workspace(ptr);
    return 0;
  };
  EXPECT_EQ(kiln_rt_parallel_for(256, task, nullptr), 0);
}

}  // namespace
