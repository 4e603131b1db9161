// The tracker's logic: runners by key, job queues, leases, re-dispatch and results
// recorded at most once. No gRPC types: the service (tracker_server.h) translates
// calls into these methods, and tests drive it directly with a fake clock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "rpc/proto/kiln_tracker.pb.h"

namespace kiln::tracker {

namespace v1 = kiln::rpc::v1;

struct DispatcherOptions {
  /// Runners poll at least this often while they run a job (told in every poll reply).
  double heartbeat_seconds = 5;
  /// A runner not heard from for this long is lost: its lease goes back to the queue.
  double runner_lost_after_seconds = 15;
  /// A job whose runner was lost this often ends as RUNNER_LOST instead of being
  /// dispatched again: a kernel that takes its device down must not take every
  /// device of the key down one after the other.
  int max_runner_losses = 2;
  /// A job ends as NO_RUNNER when its key has had no runner for this long (counted
  /// from its submission at the earliest), unless the submission asks for another
  /// deadline. Busy runners working through a long queue never trigger it.
  double default_queue_deadline_seconds = 600;
  /// A lease is also lost when its job runs this much longer than twice the larger of
  /// its run timeout and the runner's (fetching blobs, loading, a reference run), even
  /// if the runner keeps polling: a hung runner whose heartbeat thread lives on.
  double lease_grace_seconds = 300;
  /// A session whose submitter has not called for this long is dropped with its jobs
  /// (the tuner died or gave up).
  double session_idle_seconds = 900;  ///< `kiln tracker --session-timeout`
  /// A session whose tuner hung up in the middle of waiting for results (its process
  /// died: the connection closed) and did not call again for this long is dropped with
  /// its jobs at once, rather than after the session timeout: its boards go back to work.
  double hang_up_grace_seconds = 30;
  /// Jobs a runner gave back with RETRY are queued again this often, then end as
  /// INTERNAL.
  int max_retries = 3;
  /// Results per PollResults reply.
  int max_results_per_poll = 256;
  /// Jobs one submission may carry.
  int max_jobs_per_submit = 4096;
  /// Result messages are cut to this many bytes.
  size_t max_message_bytes = 4096;
};

/// Counters and per-runner facts for `kiln tracker status`.
using Status = v1::StatusResponse;

/// Thread-safe. Every method takes the current time from the injected clock.
class Dispatcher {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  Dispatcher(DispatcherOptions options, Clock clock, std::string instance_id);

  const std::string &instance_id() const { return instance_id_; }
  const DispatcherOptions &options() const { return options_; }

  /// Queues the jobs of `request` not seen before in its session (resubmitting a job id
  /// is a no-op). `has_blob` tells whether the tracker holds a blob; a job whose blobs
  /// are missing is rejected with ARTIFACT_REJECTED.
  v1::SubmitResponse submit(const v1::SubmitRequest &request, const std::function<bool(const v1::Digest &)> &has_blob);

  /// A runner's poll: registers or refreshes it, re-queues leases it no longer holds,
  /// and, when it holds none, waits up to `request.wait_seconds()` for a job, unless
  /// `cancelled` says the caller went away. Sets `refusal` (and assigns nothing) when
  /// the poll comes from a process another one replaced under the same runner id.
  v1::RunnerPollResponse poll_runner(const v1::RunnerPollRequest &request, const std::function<bool()> &cancelled,
                                     std::string &refusal);

  /// Records `result` if its lease is the job's current one; false for a late or
  /// unknown result (discarded).
  bool report_result(const std::string &runner_id, v1::JobResult result);

  /// `hung_up`, polled while waiting, tells when the caller went away (a closed
  /// connection): the session is then dropped unless it calls again within
  /// DispatcherOptions::hang_up_grace_seconds.
  /// The session's resolved, unacknowledged results; waits up to `wait_seconds` while
  /// there are none but jobs are pending.
  v1::PollResultsResponse poll_results(const std::string &session_id, double wait_seconds,
                                       const std::function<bool()> &hung_up = {});

  /// Forgets acknowledged results.
  void ack_results(const std::string &session_id, const std::vector<std::string> &job_ids);

  /// Resolves queued or running jobs of the session as CANCELLED; empty `job_ids`:
  /// all of them. Returns how many were cancelled.
  int cancel(const std::string &session_id, const std::vector<std::string> &job_ids);

  /// The target of the key's most recently seen runner, and the key's runner count.
  v1::GetTargetResponse target_of(const std::string &key);

  Status status();

  /// Digests of blobs that unresolved jobs still need (the blob store keeps them).
  std::set<std::string> blobs_in_use();

  /// Applies timeouts (lost runners, expired leases, queue deadlines). Every public
  /// method does this first; the service also calls it periodically.
  void expire();

  /// Wakes every waiting poll so that it returns (service shutdown).
  void shut_down();

 private:
  enum class JobState { kQueued, kLeased, kResolved };
  struct Job {
    std::string session_id;
    std::string key;
    v1::JobSpec spec;
    JobState state = JobState::kQueued;
    uint64_t lease_id = 0;
    std::string runner_id;
    double leased_at = 0;
    /// The runner said it holds the lease (listed it, or reported for it). A lease lost
    /// before that never reached the runner: it is not a runner loss.
    bool lease_confirmed = false;
    double submitted_at = 0;
    double queue_deadline_seconds = 0;
    int runner_losses = 0;
    int retries = 0;
    v1::JobResult result;
  };
  struct Runner {
    std::string key;
    v1::DeviceFacts facts;
    double first_seen = 0;
    double last_seen = 0;
    std::set<uint64_t> leases;
    int64_t done = 0;
    int64_t failed = 0;
    int polling = 0;  // polls of this runner waiting now
    std::string process_id;
    std::set<std::string> replaced_processes;
  };
  struct Session {
    std::deque<std::string> resolved;  // job ids, oldest first
    int64_t unresolved = 0;
    double last_seen = 0;
    /// When its tuner hung up in the middle of a call (0: it did not since its last call).
    double hung_up_at = 0;
  };

  static std::string job_key(const std::string &session_id, const std::string &job_id);
  void expire_locked(double now);
  void lose_lease(Job &job, const std::string &why);
  void resolve(Job &job, v1::JobResult result);
  v1::JobResult failure(const Job &job, v1::ResultCode code, const std::string &message) const;
  bool assign(const std::string &runner_id, Runner &runner, double now, v1::RunnerPollResponse &response);
  /// Whether a runner reporting `facts` may run `job` (its target and ABI, when given).
  static bool runs_on(const v1::JobSpec &job, const v1::DeviceFacts &facts);
  /// Whether a runner of `key` other than `runner_id` was heard from recently.
  bool another_runner_of(const std::string &key, const std::string &runner_id, double now) const;
  void requeue(Job &job);
  void drop_session(const std::string &session_id);
  void erase_if_done(const std::string &session_id);
  /// When the key last had a runner (now, while it has one).
  double key_alive_at(const std::string &key, double now) const;

  DispatcherOptions options_;
  Clock clock_;
  std::string instance_id_;
  double started_at_;

  std::mutex mutex_;
  std::condition_variable changed_;
  bool shutting_down_ = false;
  uint64_t next_lease_id_ = 1;
  std::map<std::string, Job> jobs_;                        // by job_key
  std::map<uint64_t, std::string> leases_;                 // lease id -> job_key
  std::map<std::string, std::deque<std::string>> queues_;  // key -> job_keys
  std::map<std::string, Runner> runners_;
  std::map<std::string, Session> sessions_;
  std::map<std::string, double> key_last_alive_;
  int64_t submitted_ = 0, resolved_ = 0, redispatches_ = 0, stale_results_ = 0;
};

}  // namespace kiln::tracker
