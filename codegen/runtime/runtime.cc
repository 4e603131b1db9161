/// \file
/// The C functions of codegen/abi.h that generated kernels call, exported from
/// libkiln_runtime. Everything else in the library is hidden.
///
/// Environment, read once when the pool is first used:
///   KILN_NUM_THREADS=N   threads a parallel loop uses, the caller included. Default:
///                        the CPUs this process may run on (sched_getaffinity, so
///                        `taskset` and container CPU sets are respected), else
///                        std::thread::hardware_concurrency().
///   KILN_PIN_THREADS=1   pins worker i to the (i+1)-th CPU of that set; the calling
///                        thread is not pinned. Off by default: pinning helps only
///                        when nothing else competes for the cores.
///
/// Threads: any thread may call any function here. Two external threads calling
/// kiln_rt_parallel_for at once are served one after the other (see thread_pool.h).
/// fork() is safe: the child starts with a fresh pool of the same size.

// The ABI header's declarations are the library's only exports: it is built with
// hidden visibility, and a version script (exports.map) lists exactly these symbols.
// This include must come first, before anything else includes abi.h unmarked.
#pragma GCC visibility push(default)
#include "codegen/abi.h"
#pragma GCC visibility pop

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <sched.h>

#include "codegen/runtime/thread_pool.h"

namespace kiln::runtime {

static int default_num_threads() {
  if (const char *env = std::getenv("KILN_NUM_THREADS")) {
    char *end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1) return static_cast<int>(std::min<long>(n, ThreadPool::kMaxThreads));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

static bool pin_threads_requested() {
  const char *env = std::getenv("KILN_PIN_THREADS");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

// Never destroyed: workers may still be parked when the process exits, and static
// destructors must not join them (a kernel could be running on another thread).
// Replaced, not repaired, in a forked child, whose copy has no worker threads.
static std::atomic<ThreadPool *> g_pool{nullptr};

static void prepare_fork() { g_pool.load()->before_fork(); }
static void parent_after_fork() { g_pool.load()->after_fork_in_parent(); }
static void child_after_fork() {
  ThreadPool *inherited = g_pool.load();
  g_pool.store(new ThreadPool(inherited->num_threads(), pin_threads_requested()));
}

static ThreadPool &pool() {
  static std::once_flag created;
  std::call_once(created, [] {
    g_pool.store(new ThreadPool(default_num_threads(), pin_threads_requested()));
    pthread_atfork(prepare_fork, parent_after_fork, child_after_fork);
  });
  return *g_pool.load(std::memory_order_acquire);
}

} // namespace kiln::runtime

extern "C" {

int32_t kiln_rt_parallel_for(int64_t num_tasks, kiln_task_fn fn, void *closure) {
  return kiln::runtime::pool().parallel_for(num_tasks, fn, closure);
}

int32_t kiln_rt_num_threads(void) { return kiln::runtime::pool().num_threads(); }

void kiln_rt_set_num_threads(int32_t n) { kiln::runtime::pool().set_num_threads(n); }

void *kiln_rt_alloc_workspace(size_t bytes) {
  // 64 bytes: one cache line and one AVX-512 vector, the alignment kernels assume.
  void *ptr = nullptr;
  if (posix_memalign(&ptr, 64, bytes == 0 ? 64 : bytes) != 0) return nullptr;
  return ptr;
}

void kiln_rt_free_workspace(void *ptr) { std::free(ptr); }

} // extern "C"
