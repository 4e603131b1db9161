// The tuner's side of distributed measurement: a measure::Runner that sends each
// batch through the tracker to the runners of one key (`--runner tracker://ADDR/KEY`).
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "measure/runner.h"
#include "rpc/connection.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"

namespace kiln::rpc {

/// tracker://HOST:PORT/KEY, parsed.
struct TrackerUri {
  std::string address;
  std::string key;
};
/// Throws std::invalid_argument with the expected form when `text` is not one.
TrackerUri parse_tracker_uri(const std::string &text);

struct RemoteRunnerOptions {
  ClientOptions tracker;
  std::string key;
  /// Sent with every job: the target its artifact was built for (canonical) and the
  /// artifact ABI; the tracker gives it only to a runner reporting both. Empty / 0: any.
  std::string target;
  int abi_version = 0;
  /// A job no runner of the key takes within this long fails the batch (the tuner
  /// stops with an error naming the key; a rerun resumes).
  double queue_deadline_seconds = 600;
  /// Sent with every job: bounds the tracker's lease beyond the runner's own timeout.
  double run_timeout_seconds = 10;
  /// The tracker unreachable for this long fails the batch.
  double give_up_after_seconds = 300;
  /// Progress and reconnect messages; nullptr: quiet.
  std::ostream *log = nullptr;
  /// While a batch waits, how often it says on `log` what it waits for: at once when the
  /// key has no runner at the tracker, then every this many seconds.
  double status_interval_seconds = 30;
};

/// Artifacts are read from the paths in each RunInput (the builder pool's output),
/// uploaded once per content digest, and measured on the device; the reference runs
/// there too, so correctness is judged by the device's own arithmetic. Results come
/// back in input order. Each input is one job with its own id: a job whose runner is
/// lost is run again elsewhere, and its result is taken once.
class RemoteRunner : public measure::Runner {
 public:
  explicit RemoteRunner(RemoteRunnerOptions options);

  std::vector<measure::RunResult> run(const std::vector<measure::RunInput> &batch) override;
  /// The tracker's runners measure on their own machines: builds may run beside them.
  bool timing_shares_host_cores() const override { return false; }

  /// Jobs submitted again after the tracker restarted, over this runner's life.
  int64_t resubmitted_jobs() const { return resubmitted_; }

 private:
  struct Blob {
    v1::Digest digest;
    std::string bytes;
  };
  const Blob &blob_for(const std::string &path);
  void upload_missing(const std::vector<const Blob *> &blobs);
  /// Submits `jobs`; returns the tracker's instance id. Throws on a refusal.
  std::string submit(const std::vector<v1::JobSpec> &jobs, std::map<std::string, v1::JobResult> &rejected);
  /// submit(), uploading blobs again for jobs rejected for lack of them; the jobs
  /// still rejected go into `done` as their results.
  std::string submit_all(const std::vector<v1::JobSpec> &jobs, const std::vector<const Blob *> &blobs,
                         std::map<std::string, v1::JobResult> &done);
  /// Polls and acknowledges results until every job has one; resubmits after a
  /// tracker restart (`instance` changes).
  void wait_for_results(const std::vector<v1::JobSpec> &jobs, const std::vector<const Blob *> &blobs,
                        const std::map<std::string, size_t> &index_of_job, std::string &instance,
                        std::map<std::string, v1::JobResult> &done);
  template <class Call>
  grpc::Status call_with_retry(const char *what, Call call);
  /// Says on the log what a batch waits for: that the key has no runner (always), or
  /// how many jobs are left and how many runners the key has (not on the first call).
  void report_waiting(size_t waiting, size_t total, double waited_seconds, bool first);

  RemoteRunnerOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tracker::Stub> stub_;
  std::string session_id_;
  int64_t next_job_ = 0;
  int64_t resubmitted_ = 0;
  /// By path, with the file's identity (size, mtime) to notice a rebuilt file.
  std::map<std::string, std::pair<std::string, Blob>> blobs_;
};

/// The target of the key's runners, as the tracker knows it (waiting up to 10 s for a
/// first runner of the key); throws std::runtime_error when the tracker cannot be
/// reached or has no runner of the key.
std::string remote_target(const ClientOptions &tracker, const std::string &key);

/// Throws std::runtime_error, saying which target they measure, when the key's runners
/// at the tracker are of another target than `target` (canonical); returns when they are
/// of it or none is connected yet (jobs then wait for one). Jobs for another target would
/// be refused by the tracker one batch at a time.
void check_key_serves_target(const ClientOptions &tracker, const std::string &key, const std::string &target);

}  // namespace kiln::rpc
