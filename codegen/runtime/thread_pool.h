// The persistent thread pool behind kiln_rt_parallel_for (see codegen/runtime/abi.h).
//
// One call = one *job*: tasks [0, n) of fn. The calling thread runs task 0 and then
// claims further tasks from a shared atomic index together with min(workers, n-1)
// helper workers, so uneven tasks balance themselves (dynamic claiming, in chunks
// that shrink as the job nears its end). A worker
// learns of a job when its private signal word changes, and the caller learns of the
// end when the count of helpers still running reaches 0. Both sides wait by spinning
// briefly and then sleeping on a futex (spin_then_park.h). When the caller runs out
// of tasks it withdraws the offers that no helper has taken yet, so a call never
// waits for a worker that is still asleep or descheduled. A helper that joins a job
// on a CPU another thread of the job already runs on moves to a free CPU of the
// process's mask (the scheduler can leave two spinning threads sharing one CPU).
//
// Guarantees:
// - Every task index runs exactly once, unless a task fails: then tasks above the
//   lowest-numbered failing one may be skipped, every task below it still runs, and
//   the result is that task's: it does not depend on timing.
// - A call made from inside a task (on any thread) runs its tasks serially in that
//   thread: generated code may nest parallel loops, and the pool is already busy.
// - Calls from different external threads are serialized by a mutex: one job at a
//   time, the others wait for it. Running them side by side would oversubscribe
//   the cores and ruin both timings.
// - set_num_threads() takes effect at the next call; it never disturbs a running job.

#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "codegen/runtime/abi.h"

namespace kiln::runtime {

class ThreadPool {
 public:
  /// Starts no threads: workers are created by the first call that needs them.
  /// `pin_threads`: worker i runs only on the (i+1)-th CPU of the process's affinity
  /// mask (the caller keeps its own affinity; it usually sits on the first CPU).
  ThreadPool(int num_threads, bool pin_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// kiln_rt_parallel_for; a null `fn` is an error (-1) rather than a crash.
  int32_t parallel_for(int64_t num_tasks, kiln_task_fn fn, void *closure);

  /// Threads a call uses, the caller included.
  int num_threads() const { return num_threads_.load(std::memory_order_relaxed); }
  /// Clamped to [1, kMaxThreads]. Started workers are joined or created right away,
  /// or at the next call when made from inside a task.
  void set_num_threads(int n);

  /// fork() support: hold the dispatch lock across fork so the child never inherits
  /// a job in flight. A child must abandon this pool (its workers do not exist there).
  void before_fork();
  void after_fork_in_parent();

  static constexpr int kMaxThreads = 1024;

 private:
  struct Job;
  struct Worker;

  void resize_locked(int num_workers);
  void worker_main(Worker &self, int index);
  void move_off_busy_cpu(Job &job);

  std::atomic<int> num_threads_;
  const bool pin_threads_;
  std::vector<int> cpus_;  // the process's affinity mask when the pool was made

  std::mutex dispatch_mutex_;  // one job at a time; guards everything below
  bool held_for_fork_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Job> job_;
};

}  // namespace kiln::runtime
