// `kiln runner`: a daemon on the measured device. It connects out to the tracker
// (devices sit behind NAT), polls for jobs of its key, fetches their artifacts into a
// cache by digest, measures them with measure::LocalRunner (a child process per run,
// timeouts, memory limit, correctness against the reference run on this device) or,
// for a GPU, measure::CudaRunner (a kiln-cuda-measure process per run), and
// reports the results until the tracker acknowledges them. It needs no compiler.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

#include "measure/runner.h"
#include "rpc/connection.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"

namespace kiln::rpc {

struct RunnerDaemonOptions {
  ClientOptions tracker;
  /// Which jobs this runner takes (exact match with the tuner's --runner key).
  std::string key;
  /// Stable name of this runner; empty: kept in <cache_dir>/runner-id, made once from
  /// the host name and random digits.
  std::string runner_id;
  /// Reported to the tracker; tuners that give no --target compile for it.
  std::string target;
  /// The GPU's name, for a cuda target (reported beside the target).
  std::string device_name;
  /// Fetched blobs, by digest.
  std::filesystem::path cache_dir;
  /// Past this, the least recently used blobs are deleted.
  int64_t max_cache_bytes = int64_t{1} << 30;
  /// A larger artifact is refused (ARTIFACT_REJECTED) without being fetched.
  int64_t max_blob_bytes = int64_t{64} << 20;
  /// How long one idle poll waits for a job.
  double poll_wait_seconds = 20;
  /// Reconnect backoff bounds after a failed call.
  double min_backoff_seconds = 0.1;
  double max_backoff_seconds = 10;
  /// Stop after this many jobs (0: never); for tests and one-shot use.
  int64_t max_jobs = 0;
};

class RunnerDaemon {
 public:
  /// `measurer` runs the jobs (measure::LocalRunner for CPUs: create it before anything
  /// starts threads, it forks; measure::CudaRunner for a GPU); `run_timeout_seconds` is
  /// its run timeout, reported to the tracker.
  RunnerDaemon(RunnerDaemonOptions options, measure::Runner &measurer, double run_timeout_seconds, std::ostream &log);

  /// Serves until `stop` becomes true (checked between calls and during waits) or
  /// max_jobs are done. Returns the number of jobs run.
  int64_t run(const std::atomic<bool> &stop);

  const std::string &runner_id() const { return runner_id_; }

 private:
  v1::JobResult measure_job(const v1::Assignment &assignment);
  /// The blob's path in the cache, fetching it when absent; empty with `error` set on
  /// failure.
  /// `retryable` tells a passing failure (the tracker unreachable) from a refusal.
  std::filesystem::path cached_blob(const v1::Digest &digest, std::string &error, bool &retryable,
                                    double &fetch_seconds);
  void trim_cache();
  void report(const v1::JobResult &result, const std::atomic<bool> &stop);
  /// Logs what the runner waits for and the interval, sleeps it (jittered) and grows
  /// `delay` by 1.6x up to max_backoff_seconds.
  void backoff(double &delay, const std::atomic<bool> &stop, const std::string &waiting_for);
  v1::RunnerPollRequest poll_request(double wait_seconds, uint64_t held_lease) const;

  RunnerDaemonOptions options_;
  measure::Runner &measurer_;
  std::ostream &log_;
  std::string runner_id_;
  std::string process_id_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tracker::Stub> stub_;
  v1::DeviceFacts facts_;
};

/// The device facts of this host for the runner's registration.
v1::DeviceFacts host_device_facts(const std::string &target);

}  // namespace kiln::rpc
