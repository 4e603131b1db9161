// Per-call overhead of kiln_rt_parallel_for with empty tasks, against the two
// obvious alternatives: creating and joining a thread per call, and an OpenMP
// parallel region (when built with OpenMP).
//
//   kiln_bench_runtime_overhead [--calls N] [--rounds R] [--blocks B] [--gaps G]
//
// Each back-to-back scenario times `calls` calls per round and reports the per-call
// time of its rounds (median, mean, min). Scenarios run in B interleaved blocks of
// R/B rounds, with a pause between blocks so that one runtime's spinning threads
// (OpenMP's or Kiln's) have gone to sleep before the next one is timed: on a 2-core
// machine a spinning idle thread would steal the core the measured one needs.
// The "after idle" scenarios time G single calls, each after a 2 ms sleep, when the
// workers have stopped spinning and must be woken from the futex.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#ifdef KILN_BENCH_HAVE_OPENMP
#include <omp.h>
#endif

#include "codegen/runtime/abi.h"

namespace {

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Which thread ran each task: with empty tasks the caller may finish all of them
// before a helper wakes, so the table says how often a helper took part.
thread_local bool t_is_main = false;
int64_t g_main_tasks = 0;                            // written by the main thread only
alignas(64) std::atomic<int64_t> g_helper_tasks{0};  // written by the helpers only

int32_t empty_task(int64_t, int64_t, void *) {
  if (t_is_main)
    ++g_main_tasks;
  else
    g_helper_tasks.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// Two tasks that wait for each other: both threads must take part in every call,
// which is what a real parallel loop needs and what an OpenMP region always does.
alignas(64) std::atomic<int64_t> g_arrivals{0};

int32_t rendezvous_task(int64_t task, int64_t num_tasks, void *closure) {
  empty_task(task, num_tasks, closure);
  const int64_t arrived = g_arrivals.fetch_add(1, std::memory_order_acq_rel) + 1;
  const int64_t all_here = (arrived + 1) / 2 * 2;
  while (g_arrivals.load(std::memory_order_acquire) < all_here) {
  }
  return 0;
}

struct Scenario {
  std::string name;
  int threads;
  std::function<void()> call;           // one call of the thing measured
  std::vector<double> samples;          // µs per call
  std::function<void()> setup = [] {};  // before each block, untimed
  int64_t main_tasks = 0, helper_tasks = 0;
};

Scenario kiln_scenario(int threads, int64_t num_tasks, kiln_task_fn task = empty_task) {
  std::string name = "kiln parallel_for, ";
  name += num_tasks <= 0 ? std::string("1 task/thread") : std::to_string(num_tasks) + " tasks";
  if (task == rendezvous_task) name += " that wait for each other";
  return {name,
          threads,
          [num_tasks, task] { kiln_rt_parallel_for(num_tasks, task, nullptr); },
          {},
          [threads] { kiln_rt_set_num_threads(threads); }};
}

// Times `s.call` through `timed`, also counting which threads ran its tasks.
void measure(Scenario &s, const std::function<void()> &timed) {
  g_main_tasks = 0;
  g_helper_tasks.store(0);
  timed();
  s.main_tasks += g_main_tasks;
  s.helper_tasks += g_helper_tasks.load();
}

void print_row(const Scenario &s) {
  std::vector<double> sorted = s.samples;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  for (double v : sorted) mean += v;
  mean /= static_cast<double>(sorted.size());
  const double helper_share = 100.0 * static_cast<double>(s.helper_tasks) /
                              static_cast<double>(std::max<int64_t>(1, s.main_tasks + s.helper_tasks));
  std::printf("| %-52s | %d | %8.3f | %8.3f | %8.3f | %8.3f | %5.1f%% |\n", s.name.c_str(), s.threads,
              sorted[sorted.size() / 2], mean, sorted.front(), sorted[sorted.size() * 99 / 100], helper_share);
}

long flag(int argc, char **argv, const char *name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  return fallback;
}

}  // namespace

int main(int argc, char **argv) {
  t_is_main = true;
  const long calls = flag(argc, argv, "--calls", 1000);
  const long rounds = flag(argc, argv, "--rounds", 200);
  const long blocks = std::max(1L, flag(argc, argv, "--blocks", 8));
  const long gaps = flag(argc, argv, "--gaps", 500);

  std::vector<Scenario> back_to_back;
  back_to_back.push_back(kiln_scenario(1, 0));
  back_to_back.push_back(kiln_scenario(2, 0));
  back_to_back.push_back(kiln_scenario(2, 64));
  back_to_back.push_back(kiln_scenario(2, 2, rendezvous_task));
  back_to_back.push_back({"std::thread create + join (1 extra thread)",
                          2,
                          [] {
                            std::thread helper([] { empty_task(1, 2, nullptr); });
                            empty_task(0, 2, nullptr);
                            helper.join();
                          },
                          {}});
#ifdef KILN_BENCH_HAVE_OPENMP
  for (int threads : {1, 2}) {
    back_to_back.push_back({"OpenMP empty `omp parallel` region",
                            threads,
                            [threads] {
#pragma omp parallel num_threads(threads)
                              empty_task(omp_get_thread_num(), threads, nullptr);
                            },
                            {}});
  }
  back_to_back.push_back({"OpenMP region, threads wait for each other",
                          2,
                          [] {
#pragma omp parallel num_threads(2)
                            rendezvous_task(omp_get_thread_num(), 2, nullptr);
                          },
                          {}});
#endif

  const long rounds_per_block = std::max(1L, rounds / blocks);
  for (long block = 0; block < blocks; ++block) {
    for (Scenario &s : back_to_back) {
      s.setup();
      for (int i = 0; i < 100; ++i) s.call();  // warm-up: threads exist and spin
      for (long r = 0; r < rounds_per_block; ++r) {
        measure(s, [&] {
          auto start = Clock::now();
          for (long c = 0; c < calls; ++c) s.call();
          s.samples.push_back(micros_since(start) / static_cast<double>(calls));
        });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let spinners park
    }
  }

  std::vector<Scenario> after_idle;
  after_idle.push_back(kiln_scenario(2, 0));
  after_idle.back().name = "kiln parallel_for after 2 ms idle";
  after_idle.push_back(kiln_scenario(2, 2, rendezvous_task));
  after_idle.back().name = "kiln, tasks wait for each other, after 2 ms idle";
#ifdef KILN_BENCH_HAVE_OPENMP
  after_idle.push_back({"OpenMP region after 2 ms idle",
                        2,
                        [] {
#pragma omp parallel num_threads(2)
                          empty_task(omp_get_thread_num(), 2, nullptr);
                        },
                        {}});
#endif
  for (long g = 0; g < gaps; ++g) {
    for (Scenario &s : after_idle) {
      s.setup();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      measure(s, [&] {
        auto start = Clock::now();
        s.call();
        s.samples.push_back(micros_since(start));
      });
    }
  }

  std::printf("calls/round %ld, rounds %ld (in %ld blocks), idle gaps %ld; hardware threads %u\n\n", calls,
              rounds_per_block * blocks, blocks, gaps, std::thread::hardware_concurrency());
  std::printf(
      "| scenario | threads | median µs/call | mean µs/call | min µs/call | p99 µs/call | tasks run by helpers |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Scenario &s : back_to_back) print_row(s);
  for (const Scenario &s : after_idle) print_row(s);
#ifndef KILN_BENCH_HAVE_OPENMP
  std::printf("\n(OpenMP not found at configure time: no OpenMP reference rows)\n");
#endif
  return 0;
}
