// Builds candidates on this machine with a fixed set of worker threads, each owning one
// codegen::Compiler (it is not thread-safe). See measure/README.md, "Builder pool".
#pragma once

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "codegen/codegen.h"
#include "measure/builder.h"
#include "measure/measurement_lock.h"

namespace kiln::measure {

struct LocalBuilderOptions {
  int num_workers = 2;
  /// Artifacts go to <work_dir>/<name>.so; created if missing.
  std::filesystem::path work_dir;
  double build_timeout_seconds = 30;
  /// true: every build runs in a forked child that is killed at the timeout (and whose
  /// crash cannot take the tuner down). false: builds run in the worker thread, a slow
  /// build is only classified build_timeout after it finished (for debugging a build
  /// under gdb, or where fork is unavailable).
  bool isolate_builds = true;
  /// With isolate_builds: address space a build's child may add to what its worker
  /// already maps, in MiB (0: no limit). A program whose code grows without bound (a
  /// fully unrolled nest) then fails as a build error instead of exhausting the host.
  int64_t build_memory_limit_mb = 8192;
  /// Held shared while a build runs, so builds never overlap a timing run.
  std::filesystem::path lock_path = default_measurement_lock_path();
  /// Waiting longer than this for the lock is an error naming its holders.
  double lock_wait_seconds = 900;
};

/// When `work_dir` is named NAME_PID with PID this process's (kiln tune's
/// /tmp/kiln_tune_PID), removes the folders beside it named NAME_N whose process N is
/// gone (killed before it could remove its own folder) and that belong to this user.
/// Returns how many it removed; the pool's constructor calls it.
size_t remove_stale_work_dirs(const std::filesystem::path &work_dir);

/// Installs SIGINT and SIGTERM handlers that remove `dir` (and everything below it)
/// and then end the process as the signal would have: a command interrupted while it
/// builds into a folder of its own leaves no folder behind. One folder per process (a
/// later call replaces it). The removal uses async-signal-safe calls only.
void remove_on_interrupt(const std::filesystem::path &dir);

class LocalBuilderPool : public Builder {
 public:
  LocalBuilderPool(int num_workers, std::filesystem::path work_dir, double build_timeout_seconds);
  explicit LocalBuilderPool(LocalBuilderOptions options);
  ~LocalBuilderPool() override;
  LocalBuilderPool(const LocalBuilderPool &) = delete;
  LocalBuilderPool &operator=(const LocalBuilderPool &) = delete;

  /// Thread-safe; concurrent batches are built one after the other.
  std::vector<BuildResult> build(const std::vector<BuildInput> &batch) override;

  const LocalBuilderOptions &options() const { return options_; }

 private:
  struct Batch;
  void worker_loop(codegen::Compiler &compiler);
  BuildResult build_one(codegen::Compiler &compiler, const BuildInput &input, const std::filesystem::path &path);

  LocalBuilderOptions options_;
  MeasurementLock lock_;
  std::vector<std::unique_ptr<codegen::Compiler>> compilers_;
  std::vector<std::thread> workers_;

  std::mutex batch_mutex_;  // one batch at a time
  std::mutex mutex_;        // guards the fields below
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  Batch *current_ = nullptr;
  bool stopping_ = false;
};

}  // namespace kiln::measure
