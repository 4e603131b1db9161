// The C functions of codegen/runtime/abi.h that generated kernels call, exported from
// libkiln_runtime. Everything else in the library is hidden.
//
// Environment, read once when the pool is first used:
//   KILN_NUM_THREADS=N   threads a parallel loop uses, the caller included. Default:
//                        the CPUs this process may run on (sched_getaffinity, so
//                        `taskset` and container CPU sets are respected), else
//                        std::thread::hardware_concurrency().
//   KILN_PIN_THREADS=1   pins worker i to the (i+1)-th CPU of that set; the calling
//                        thread is not pinned. Off by default: pinning helps only
//                        when nothing else competes for the cores.
//
// Threads: any thread may call any function here. Two external threads calling
// kiln_rt_parallel_for at once are served one after the other (see thread_pool.h).
// fork() is safe: the child starts with a fresh pool of the same size.

// The ABI header's declarations are the library's only exports: it is built with
// hidden visibility, and a version script (exports.map) lists exactly these symbols.
// This include must come first, before anything else includes abi.h unmarked.
#pragma GCC visibility push(default)
#include "codegen/runtime/abi.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

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

// Scratch buffers, cached per thread. A kernel allocates the same buffers call after
// call (a packed panel per tile of a parallel loop); from malloc each call could get
// memory that was returned to the OS and pay its page faults again, and how often
// depended on the process's allocation history: the same kernel timed differently in
// the tuner's runner and in a long-lived benchmark process. Each block carries its size
// in a 64-byte header, since the free call passes only the pointer.
class WorkspaceCache {
 public:
  ~WorkspaceCache() {
    for (const Block &b : free_) std::free(b.base);
  }

  void *take(size_t bytes) {
    // 64 bytes: one cache line and one AVX-512 vector, the alignment kernels assume.
    if (bytes > SIZE_MAX - 2 * kHeader) return nullptr;
    size_t size = (std::max<size_t>(bytes, 1) + kHeader - 1) / kHeader * kHeader;
    for (size_t i = free_.size(); i-- > 0;) {
      if (free_[i].size != size) continue;
      void *base = free_[i].base;
      cached_bytes_ -= size;
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
      return static_cast<char *>(base) + kHeader;
    }
    void *base = nullptr;
    if (posix_memalign(&base, kHeader, size + kHeader) != 0) return nullptr;
    *static_cast<size_t *>(base) = size;
    return static_cast<char *>(base) + kHeader;
  }

  void give_back(void *ptr) {
    if (ptr == nullptr) return;
    void *base = static_cast<char *>(ptr) - kHeader;
    size_t size = *static_cast<size_t *>(base);
    if (size > kMaxCachedBytes) {
      std::free(base);
      return;
    }
    while (free_.size() >= kMaxBlocks || cached_bytes_ + size > kMaxCachedBytes) {  // the oldest go
      cached_bytes_ -= free_.front().size;
      std::free(free_.front().base);
      free_.erase(free_.begin());
    }
    free_.push_back({base, size});
    cached_bytes_ += size;
  }

 private:
  static constexpr size_t kHeader = 64;
  static constexpr size_t kMaxBlocks = 16;
  static constexpr size_t kMaxCachedBytes = size_t{32} << 20;  // per thread
  struct Block {
    void *base;
    size_t size;
  };
  std::vector<Block> free_;  // most recently returned last
  size_t cached_bytes_ = 0;
};

thread_local WorkspaceCache t_workspaces;

}  // namespace kiln::runtime

extern "C" {

int32_t kiln_rt_parallel_for(int64_t num_tasks, kiln_task_fn fn, void *closure) {
  return kiln::runtime::pool().parallel_for(num_tasks, fn, closure);
}

int32_t kiln_rt_num_threads(void) { return kiln::runtime::pool().num_threads(); }

void kiln_rt_set_num_threads(int32_t n) { kiln::runtime::pool().set_num_threads(n); }

void *kiln_rt_alloc_workspace(size_t bytes) { return kiln::runtime::t_workspaces.take(bytes); }

void kiln_rt_free_workspace(void *ptr) { kiln::runtime::t_workspaces.give_back(ptr); }

}  // extern "C"
