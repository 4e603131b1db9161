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
///
/// Every event costs O(log n) in the jobs, runners and waiting polls: queues are per key
/// and per session, timeouts sit in ordered sets, and a waiting poll is a callback, not
/// a thread. Long polls (start_runner_poll, start_poll_results) call their `done`
/// exactly once, never under the dispatcher's lock: at once when there is something to
/// say, when a job or result arrives, when the wait ends (expire() notices), when the
/// caller goes away (end_wait) or at shutdown.
class Dispatcher {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic
  /// Told +1 when an unresolved job starts needing a blob and -1 when it stops; the blob
  /// store keeps pinned blobs. Called under the dispatcher's lock.
  using BlobPin = std::function<void(const v1::Digest &digest, int delta)>;
  using WaitId = uint64_t;  ///< 0: the poll completed before its start returned
  using RunnerPollDone = std::function<void(v1::RunnerPollResponse response, std::string refusal)>;
  using ResultsDone = std::function<void(v1::PollResultsResponse response)>;

  Dispatcher(DispatcherOptions options, Clock clock, std::string instance_id, BlobPin pin_blob = {});

  const std::string &instance_id() const { return instance_id_; }
  const DispatcherOptions &options() const { return options_; }

  /// Queues the jobs of `request` not seen before in its session (resubmitting a job id
  /// is a no-op). `has_blob` tells whether the tracker holds a blob; a job whose blobs
  /// are missing is rejected with ARTIFACT_REJECTED.
  v1::SubmitResponse submit(const v1::SubmitRequest &request, const std::function<bool(const v1::Digest &)> &has_blob);

  /// A runner's poll: registers or refreshes it, re-queues leases it no longer holds,
  /// and, when it holds none, waits up to `request.wait_seconds()` (of the clock) for a
  /// job. `done` gets a refusal (and no assignment) when the poll comes from a process
  /// another one replaced under the same runner id, or from a runner of another target
  /// than its key's.
  WaitId start_runner_poll(const v1::RunnerPollRequest &request, RunnerPollDone done);

  /// The session's resolved, unacknowledged results; waits up to `wait_seconds` while
  /// there are none but jobs are pending.
  WaitId start_poll_results(const std::string &session_id, double wait_seconds, ResultsDone done);

  /// Completes a waiting poll now. `caller_gone`: its connection closed; a tuner's
  /// session is then dropped unless it calls again within
  /// DispatcherOptions::hang_up_grace_seconds. A poll that completed already: no-op.
  void end_wait(WaitId id, bool caller_gone);

  /// Blocking forms of the two polls (tests, the fuzz target): they wait in real time
  /// up to the wait asked for; `cancelled` / `hung_up` are checked while they wait.
  v1::RunnerPollResponse poll_runner(const v1::RunnerPollRequest &request, const std::function<bool()> &cancelled,
                                     std::string &refusal);
  v1::PollResultsResponse poll_results(const std::string &session_id, double wait_seconds,
                                       const std::function<bool()> &hung_up = {});

  /// Records `result` if its lease is the job's current one; false for a late or
  /// unknown result (discarded).
  bool report_result(const std::string &runner_id, v1::JobResult result);

  /// Forgets acknowledged results.
  void ack_results(const std::string &session_id, const std::vector<std::string> &job_ids);

  /// Resolves queued or running jobs of the session as CANCELLED; empty `job_ids`:
  /// all of them. Returns how many were cancelled.
  int cancel(const std::string &session_id, const std::vector<std::string> &job_ids);

  /// The target of the key's most recently seen runner, and the key's runner count.
  v1::GetTargetResponse target_of(const std::string &key);

  Status status();

  /// Applies timeouts (lost runners, expired leases, queue deadlines, ended waits).
  /// Every public method does this first; the service also calls it periodically.
  void expire();

  /// Completes every waiting poll, and every later one at once (service shutdown).
  void shut_down();

 private:
  class Locked;
  enum class JobState { kQueued, kLeased, kResolved };
  struct Job {
    std::string session_id;
    std::string key;
    v1::JobSpec spec;
    JobState state = JobState::kQueued;
    uint64_t lease_id = 0;
    std::string runner_id;
    double leased_at = 0;
    double lease_deadline = 0;
    /// The runner said it holds the lease (listed it, or reported for it). A lease lost
    /// before that never reached the runner: it is not a runner loss.
    bool lease_confirmed = false;
    double submitted_at = 0;
    double queue_deadline_seconds = 0;
    /// When its queue deadline is checked next (in queue_deadlines_); -1: not armed
    /// (leased, resolved, or parked while runners serve its key).
    double deadline_check_at = -1;
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
    int polling = 0;  // polls of this runner waiting now (it is not expired meanwhile)
    std::string process_id;
    std::set<std::string> replaced_processes;
  };
  struct Session {
    std::deque<std::string> resolved;  // job ids, oldest first
    int64_t unresolved = 0;
    double last_seen = 0;
    /// When its tuner hung up in the middle of a call (0: it did not since its last call).
    double hung_up_at = 0;
    std::set<WaitId> waiters;
  };
  /// A key's runners and queue. Queued jobs wait per session, and sessions take turns:
  /// several tuners sharing a key's boards get an equal share of dispatches.
  struct Key {
    std::set<std::string> runners;
    /// (target, ABI) -> how many of its runners report it.
    std::map<std::pair<std::string, int64_t>, int> facts;
    double last_alive = 0;                                  ///< the last poll of any of its runners
    std::map<std::string, std::deque<std::string>> queues;  ///< session -> job keys, next first
    std::deque<std::string> turns;                          ///< sessions with a non-empty queue, next first
    std::set<WaitId> waiters;                               ///< runner polls waiting for a job (ids grow: oldest first)
    /// Queued jobs whose deadline came while runners served the key: armed again when the
    /// key loses its last runner.
    std::vector<std::string> parked;
  };
  /// A key's unresolved jobs, kept as they change state (set_state) for status().
  struct KeyLoad {
    int64_t in_flight = 0;
    std::multiset<double> queued_since;  ///< submitted_at of each queued job
  };
  struct RunnerWait {
    std::string runner_id;
    std::string key;
    double deadline = 0;
    v1::RunnerPollResponse response;
    RunnerPollDone done;
  };
  struct ResultsWait {
    std::string session_id;
    double deadline = 0;
    ResultsDone done;
  };

  static std::string job_key(const std::string &session_id, const std::string &job_id);
  void expire_locked(double now);
  void lose_lease(Job &job, const std::string &why);
  /// Ends the job's lease in every index (the job's state is the caller's).
  void end_lease(Job &job);
  void resolve(Job &job, v1::JobResult result);
  v1::JobResult failure(const Job &job, v1::ResultCode code, const std::string &message) const;
  /// Leases the key's next job that `runner` may run into `response`; false when none.
  bool assign(const std::string &runner_id, Runner &runner, double now, v1::RunnerPollResponse &response);
  /// Hands queued jobs of `key` to its waiting runners.
  void dispatch(const std::string &key, double now);
  /// Whether a runner reporting `facts` may run `job` (its target and ABI, when given).
  static bool runs_on(const v1::JobSpec &job, const v1::DeviceFacts &facts);
  void enqueue(Job &job, const std::string &id, bool front);
  /// Changes a job's state, keeping load_ counted.
  void set_state(Job &job, JobState state);
  /// Adds (+1) or removes (-1) an unresolved job from its key's load_.
  void count_load(const Job &job, int delta);
  void arm_deadline(Job &job, const std::string &id, double at);
  void disarm_deadline(Job &job, const std::string &id);
  void requeue(Job &job);
  void drop_session(const std::string &session_id);
  void erase_if_done(const std::string &session_id);
  void set_runner_key(const std::string &runner_id, Runner &runner, const std::string &key,
                      const v1::DeviceFacts &facts);
  void erase_runner(const std::string &runner_id, const std::string &why);
  /// Runners not waiting in a poll are in runner_expiry_ by their last poll.
  void touch_runner(const std::string &runner_id, Runner &runner, double now);
  void finish_runner_wait(WaitId id, double now);
  void finish_results_wait(WaitId id);
  void notify_session(const std::string &session_id);
  v1::PollResultsResponse results_of(const std::string &session_id);
  void pin(const Job &job, int delta);

  DispatcherOptions options_;
  Clock clock_;
  std::string instance_id_;
  BlobPin pin_blob_;
  double started_at_;

  std::mutex mutex_;
  /// Done-callbacks of completed polls, run by Locked after it unlocks.
  std::vector<std::function<void()>> completions_;
  bool shutting_down_ = false;
  uint64_t next_lease_id_ = 1;
  WaitId next_wait_id_ = 1;
  std::map<std::string, Job> jobs_;         // by job_key
  std::map<uint64_t, std::string> leases_;  // lease id -> job_key
  std::map<std::string, Key> keys_;
  std::map<std::string, KeyLoad> load_;  // keys with unresolved jobs
  std::map<std::string, Runner> runners_;
  std::map<std::string, Session> sessions_;
  std::map<WaitId, RunnerWait> runner_waits_;
  std::map<WaitId, ResultsWait> results_waits_;
  std::set<std::pair<double, std::string>> runner_expiry_;    // (last poll, runner id)
  std::set<std::pair<double, uint64_t>> lease_deadlines_;     // (deadline, lease id)
  std::set<std::pair<double, std::string>> queue_deadlines_;  // (check at, job key)
  std::set<std::pair<double, WaitId>> wait_deadlines_;        // both kinds of waits
  int64_t submitted_ = 0, resolved_ = 0, redispatches_ = 0, stale_results_ = 0;
};

}  // namespace kiln::tracker
