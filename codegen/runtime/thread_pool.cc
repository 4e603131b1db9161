// Implementation of the persistent thread pool; the protocol is described in
// thread_pool.h and spin_then_park.h.

#include "codegen/runtime/thread_pool.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <exception>

#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "codegen/runtime/spin_then_park.h"

namespace kiln::runtime {

// True on pool workers always, and on a caller while it runs tasks: a parallel_for
// made there runs serially.
static thread_local bool t_inside_task = false;

// Written by the caller before it signals the helpers and read by them afterwards;
// not touched again by a helper once it has decremented `helpers_running`, which is
// what lets the caller reuse the job for its next call.
struct ThreadPool::Job {
  kiln_task_fn fn = nullptr;
  void *closure = nullptr;
  int64_t num_tasks = 0;
  int64_t num_threads = 1;  // caller + helpers offered the job

  // CPUs (below 64) that a thread of this job runs on: the caller's, then each
  // helper's as it joins. A helper that finds its CPU taken moves (see worker_main).
  alignas(64) std::atomic<uint64_t> busy_cpus{0};

  // Claimed by every thread of the job; its own cache line, away from the read-mostly
  // fields above.
  alignas(64) std::atomic<int64_t> next_task{0};
  // Tasks above the lowest failed one are skipped; those below still run, so the
  // result does not depend on which thread got there first.
  std::atomic<int64_t> lowest_failed_task{INT64_MAX};

  alignas(64) std::atomic<uint32_t> helpers_running{0};  // the caller waits for 0
  std::atomic<uint32_t> caller_sleepers{0};

  std::mutex failure_mutex;  // failures are rare; a lock keeps task and code together
  int32_t failure_code = 0;

  void record_failure(int64_t task, int32_t code) {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (task < lowest_failed_task.load(std::memory_order_relaxed)) {
      lowest_failed_task.store(task, std::memory_order_relaxed);
      failure_code = code;
    }
  }

  // Guided self-scheduling: a claim takes 1/(2·threads) of the tasks still unclaimed,
  // at least one. Large chunks while much is left keep the shared index from
  // bouncing between cores once per tiny task; chunks shrink to single tasks near the
  // end, so uneven tasks still balance.
  bool claim(int64_t &begin, int64_t &end) {
    int64_t next = next_task.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t limit = std::min(num_tasks, lowest_failed_task.load(std::memory_order_relaxed));
      if (next >= limit) return false;
      const int64_t chunk = std::max<int64_t>(1, (limit - next) / (2 * num_threads));
      if (next_task.compare_exchange_weak(next, next + chunk, std::memory_order_relaxed)) {
        begin = next;
        end = next + chunk;
        return true;
      }
    }
  }

  // Claims and runs tasks until none are left (or only ones above a failure).
  void run_claimed_tasks() {
    int64_t begin = 0, end = 0;
    while (claim(begin, end)) {
      for (int64_t task = begin; task < end; ++task) {
        if (task > lowest_failed_task.load(std::memory_order_relaxed)) return;
        if (int32_t code = fn(task, num_tasks, closure); code != 0) record_failure(task, code);
      }
    }
  }
};

// One cache line per worker: the caller writes `signal` and the worker spins on it.
struct alignas(64) ThreadPool::Worker {
  std::atomic<uint32_t> signal{0};  // bumped once per job offered (or to stop)
  std::atomic<uint32_t> sleepers{0};
  // True while a job is offered to this worker. Whoever exchanges it back to false
  // first owns the offer: the worker (it joins the job) or the caller (it withdraws
  // the offer, because no task was left by the time the worker woke up).
  std::atomic<bool> offered{false};
  std::atomic<bool> stop{false};  // set before the last bump of `signal`
  std::thread thread;
};

// Runs all tasks in this thread, with the same failure semantics as the pool.
static int32_t run_serially(int64_t num_tasks, kiln_task_fn fn, void *closure) {
  bool was_inside = t_inside_task;
  t_inside_task = true;
  int32_t result = 0;
  for (int64_t task = 0; task < num_tasks && result == 0; ++task) result = fn(task, num_tasks, closure);
  t_inside_task = was_inside;
  return result;
}

static uint64_t cpu_bit(int cpu) { return cpu >= 0 && cpu < 64 ? uint64_t{1} << cpu : 0; }

static std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

ThreadPool::ThreadPool(int num_threads, bool pin_threads)
    : num_threads_(std::clamp(num_threads, 1, kMaxThreads)),
      pin_threads_(pin_threads),
      cpus_(affinity_cpus()),
      job_(std::make_unique<Job>()) {}

ThreadPool::~ThreadPool() {
  std::lock_guard<std::mutex> lock(dispatch_mutex_);
  resize_locked(0);
}

int32_t ThreadPool::parallel_for(int64_t num_tasks, kiln_task_fn fn, void *closure) {
  if (fn == nullptr) return -1;
  int threads = num_threads();
  if (num_tasks <= 0) num_tasks = threads;
  if (t_inside_task || threads == 1 || num_tasks == 1) return run_serially(num_tasks, fn, closure);

  std::lock_guard<std::mutex> lock(dispatch_mutex_);
  threads = num_threads();  // may have changed while we waited for the lock
  if (static_cast<int>(workers_.size()) != threads - 1) resize_locked(threads - 1);
  const auto helpers = static_cast<uint32_t>(std::min<int64_t>(static_cast<int64_t>(workers_.size()), num_tasks - 1));
  if (helpers == 0) return run_serially(num_tasks, fn, closure);  // no thread could be created

  Job &job = *job_;
  job.fn = fn;
  job.closure = closure;
  job.num_tasks = num_tasks;
  job.num_threads = helpers + 1;
  job.next_task.store(1, std::memory_order_relaxed);  // task 0 is the caller's
  job.lowest_failed_task.store(INT64_MAX, std::memory_order_relaxed);
  job.failure_code = 0;
  job.helpers_running.store(helpers, std::memory_order_relaxed);
  job.busy_cpus.store(cpu_bit(sched_getcpu()), std::memory_order_relaxed);
  for (uint32_t i = 0; i < helpers; ++i) {
    Worker &worker = *workers_[i];
    worker.offered.store(true, std::memory_order_release);  // publishes the job
    worker.signal.fetch_add(1, std::memory_order_seq_cst);
    wake_if_sleeping(worker.signal, worker.sleepers);
  }

  t_inside_task = true;
  if (int32_t code = fn(0, num_tasks, closure); code != 0) job.record_failure(0, code);
  job.run_claimed_tasks();
  t_inside_task = false;

  // No task is left to claim. A helper that has not taken its offer yet (asleep, or
  // not scheduled on a busy machine) would only wake to find nothing to do: withdraw
  // the offer instead of waiting a scheduler latency for it. Only helpers that did
  // join are waited for, and they are running.
  uint32_t withdrawn = 0;
  for (uint32_t i = 0; i < helpers; ++i)
    if (workers_[i]->offered.exchange(false, std::memory_order_acq_rel)) ++withdrawn;
  if (withdrawn != 0) job.helpers_running.fetch_sub(withdrawn, std::memory_order_seq_cst);
  spin_then_park(job.helpers_running, job.caller_sleepers, [](uint32_t running) { return running == 0; });
  return job.failure_code;
}

void ThreadPool::worker_main(Worker &self, int index) {
  t_inside_task = true;
  if (pin_threads_ && !cpus_.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus_[static_cast<size_t>(index + 1) % cpus_.size()], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
  }
  uint32_t seen = 0;
  for (;;) {
    seen = spin_then_park(self.signal, self.sleepers, [seen](uint32_t signal) { return signal != seen; });
    if (self.stop.load(std::memory_order_relaxed)) return;
    if (!self.offered.exchange(false, std::memory_order_acq_rel)) continue;  // withdrawn
    Job &job = *job_;
    if (!pin_threads_) move_off_busy_cpu(job);
    job.run_claimed_tasks();
    // After this decrement the caller may start its next job: touch nothing of this
    // one except the wake-up, which is harmless if it reaches the next job instead.
    if (job.helpers_running.fetch_sub(1, std::memory_order_seq_cst) == 1)
      wake_if_sleeping(job.helpers_running, job.caller_sleepers);
  }
}

// A helper that never sleeps between back-to-back jobs is never re-placed by a
// wake-up, and the scheduler's balancing may leave it sharing the caller's CPU for
// seconds while another CPU idles: a 2-thread kernel then runs at 1-thread speed
// (seen: GEMM 26 ms instead of 13 on a 2-CPU machine, in some processes for their
// whole life). So a helper that finds its CPU already taken by the job restricts
// itself to the CPUs of the process mask not yet taken, which moves it at once; it
// keeps that mask until it finds itself on a taken CPU again. One sched_getcpu per
// job otherwise.
void ThreadPool::move_off_busy_cpu(Job &job) {
  uint64_t mine = cpu_bit(sched_getcpu());
  if (mine == 0) return;
  uint64_t taken = job.busy_cpus.fetch_or(mine, std::memory_order_relaxed);
  if ((taken & mine) == 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus_)
    if (cpu_bit(cpu) != 0 && (taken & cpu_bit(cpu)) == 0) CPU_SET(cpu, &set);
  if (CPU_COUNT(&set) == 0) return;  // more threads than CPUs: sharing is unavoidable
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0)
    job.busy_cpus.fetch_or(cpu_bit(sched_getcpu()), std::memory_order_relaxed);
}

void ThreadPool::resize_locked(int num_workers) {
  const auto target = static_cast<size_t>(std::max(num_workers, 0));
  if (workers_.size() > target) {
    // Stop all surplus workers first, then join them: they wind down in parallel.
    for (size_t i = target; i < workers_.size(); ++i) {
      Worker &worker = *workers_[i];
      worker.stop.store(true, std::memory_order_relaxed);
      worker.signal.fetch_add(1, std::memory_order_seq_cst);
      wake_if_sleeping(worker.signal, worker.sleepers);
    }
    for (size_t i = target; i < workers_.size(); ++i) workers_[i]->thread.join();
    workers_.resize(target);
    return;
  }
  // Workers take no asynchronous signals: those belong to the application's threads
  // (e.g. a runner's timeout alarm). Faults raised by a task's own code stay
  // deliverable so that a crash handler still sees them.
  sigset_t blocked, previous;
  sigfillset(&blocked);
  for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigdelset(&blocked, fault);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  while (workers_.size() < target) {
    auto worker = std::make_unique<Worker>();
    const int index = static_cast<int>(workers_.size());
    try {
      worker->thread = std::thread([this, w = worker.get(), index] { worker_main(*w, index); });
    } catch (const std::exception &error) {
      // Out of threads: run with the workers we have rather than fail the kernel.
      std::fprintf(stderr, "kiln runtime: could not start worker thread %d (%s); using %zu\n", index + 1, error.what(),
                   workers_.size() + 1);
      break;
    }
    char name[16];  // the kernel's limit, NUL included
    std::snprintf(name, sizeof(name), "kiln-worker-%u", static_cast<unsigned>(index + 1) % 1000u);
    pthread_setname_np(worker->thread.native_handle(), name);
    workers_.push_back(std::move(worker));
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void ThreadPool::set_num_threads(int n) {
  n = std::clamp(n, 1, kMaxThreads);
  num_threads_.store(n, std::memory_order_relaxed);
  // From inside a task the lock may be held by this very call chain: leave the
  // resize to the next call. Only shrink here; new workers start when first needed.
  if (t_inside_task) return;
  std::lock_guard<std::mutex> lock(dispatch_mutex_);
  if (static_cast<int>(workers_.size()) > n - 1) resize_locked(n - 1);
}

void ThreadPool::before_fork() {
  // A fork from inside a task cannot wait for its own job to end; the child gets a
  // fresh pool either way.
  if (t_inside_task) return;
  dispatch_mutex_.lock();
  held_for_fork_ = true;
}

void ThreadPool::after_fork_in_parent() {
  if (!held_for_fork_) return;
  held_for_fork_ = false;
  dispatch_mutex_.unlock();
}

}  // namespace kiln::runtime
