// Runs candidates on this machine, each in its own throw-away process forked by a
// long-lived server process (see measure/README.md, "Runner design").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "measure/measurement_lock.h"
#include "measure/runner.h"
#include "measure/sandbox.h"
#include "target/target.h"

namespace kiln::measure {

/// Where libkiln_runtime was built, or empty when this build has none.
std::string default_runtime_library_path();

struct LocalRunnerOptions {
  /// Per run of the reference and per candidate: loading + checking + timing.
  double run_timeout_seconds = 10;
  /// Address space a candidate may allocate beyond what its process maps at start.
  int64_t memory_limit_bytes = int64_t{4} << 30;
  /// Threads kernels use (kiln_rt_set_num_threads); 0 keeps the runtime's default.
  int num_threads = 0;
  /// Candidates run sandboxed (measure/sandbox.h): what a runner serving a tracker does.
  SandboxOptions sandbox;
  /// Held exclusively while a candidate runs; empty: no coordination with builds.
  std::filesystem::path lock_path = default_measurement_lock_path();
  /// Waiting longer than this for the lock is an error naming its holders.
  double lock_wait_seconds = 900;
  /// Reference outputs kept in the server, oldest evicted first.
  int64_t reference_cache_bytes = int64_t{1} << 30;
  /// Loaded into the server when the process does not already provide kiln_rt_*.
  std::string runtime_library = default_runtime_library_path();
  /// Empty: the server is a fork of this process. Otherwise the server is this
  /// program (kiln-measure-server, or a wrapper and its arguments before it, e.g.
  /// `qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib kiln-measure-server-aarch64`
  /// to measure AArch64 artifacts here); it gets its socket and the options above as flags.
  std::vector<std::string> server_command;
  /// Batches of more than one candidate: each candidate is loaded, checked and
  /// calibrated in its own process as always, then the batch's timed repeats run
  /// round-robin in one shared process (measure/README.md, "Interleaved timing"), so
  /// that slow drift of the host (frequency, neighbours) hits every candidate alike.
  /// false: every candidate is timed alone, one after the other.
  bool interleave_batches = true;
};

/// Thread-safe: concurrent run() calls are served one at a time (timing runs alone).
class LocalRunner : public Runner {
 public:
  /// Forks the server now. Create the runner early, before the process starts threads
  /// of its own where possible: a fork copies only the calling thread, and a lock that
  /// another thread held at that moment stays locked in the server forever.
  explicit LocalRunner(LocalRunnerOptions options = {});
  ~LocalRunner() override;
  LocalRunner(const LocalRunner &) = delete;
  LocalRunner &operator=(const LocalRunner &) = delete;

  std::vector<RunResult> run(const std::vector<RunInput> &batch) override;
  RunResult run_one(const RunInput &input);
  bool times_batch_together() const override { return options_.interleave_batches; }
  int64_t memory_limit_bytes() const override { return options_.memory_limit_bytes; }

  const LocalRunnerOptions &options() const { return options_; }

 private:
  void start_server();
  void stop_server();
  RunResult run_locked(const RunInput &input);
  std::vector<RunResult> run_batch_locked(const std::vector<RunInput> &batch);
  /// Sends one request to the server (restarting it once if it is gone) and reads the
  /// reply; nullopt with the reason in `failure` when the server does not answer.
  std::optional<std::string> request(const std::string &frame, double reply_timeout_seconds, const std::string &what,
                                     std::string *failure);

  LocalRunnerOptions options_;
  MeasurementLock lock_;
  std::mutex mutex_;
  pid_t server_pid_ = -1;
  int server_socket_ = -1;
};

}  // namespace kiln::measure
