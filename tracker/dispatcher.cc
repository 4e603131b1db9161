#include "tracker/dispatcher.h"

#include <algorithm>
#include <chrono>

namespace kiln::tracker {

namespace {

// Long polls re-check timeouts at least this often, so a lost runner's job moves on
// while other pollers wait.
constexpr auto kExpiryTick = std::chrono::milliseconds(500);

}  // namespace

Dispatcher::Dispatcher(DispatcherOptions options, Clock clock, std::string instance_id)
    : options_(options), clock_(std::move(clock)), instance_id_(std::move(instance_id)), started_at_(clock_()) {}

std::string Dispatcher::job_key(const std::string &session_id, const std::string &job_id) {
  return session_id + '\n' + job_id;
}

v1::JobResult Dispatcher::failure(const Job &job, v1::ResultCode code, const std::string &message) const {
  v1::JobResult result;
  result.set_job_id(job.spec.job_id());
  result.set_lease_id(job.lease_id);
  result.set_code(code);
  result.set_message(message);
  return result;
}

v1::SubmitResponse Dispatcher::submit(const v1::SubmitRequest &request,
                                      const std::function<bool(const v1::Digest &)> &has_blob) {
  std::lock_guard<std::mutex> lock(mutex_);
  double now = clock_();
  expire_locked(now);
  v1::SubmitResponse response;
  response.set_tracker_instance_id(instance_id_);
  double deadline_seconds =
      request.queue_deadline_seconds() > 0 ? request.queue_deadline_seconds() : options_.default_queue_deadline_seconds;
  Session &session = sessions_[request.session_id()];
  session.last_seen = now;
  session.hung_up_at = 0;
  for (const v1::JobSpec &spec : request.jobs()) {
    std::string id = job_key(request.session_id(), spec.job_id());
    if (jobs_.count(id)) {
      response.add_accepted_job_ids(spec.job_id());
      continue;
    }
    Job job;
    job.session_id = request.session_id();
    job.key = request.key();
    job.spec = spec;
    job.submitted_at = now;
    job.queue_deadline_seconds = deadline_seconds;
    std::string why;
    if (spec.job_id().empty()) {
      why = "the job has no job_id";
    } else if (!has_blob(spec.artifact())) {
      why = "the tracker does not hold the artifact " + spec.artifact().sha256() + "; upload it first";
    } else if (!spec.reference().sha256().empty() && !has_blob(spec.reference())) {
      why = "the tracker does not hold the reference " + spec.reference().sha256() + "; upload it first";
    } else if (spec.run_timeout_seconds() <= 0) {
      why = "run_timeout_seconds must be positive";
    } else {
      // The key's runners are one device (poll_runner sees to it): a job built for
      // another target or ABI would wait for a runner that never comes.
      const Runner *serving = nullptr;
      for (const auto &[id, runner] : runners_) {
        if (runner.key != request.key() || runner.facts.target().empty()) continue;
        serving = &runner;
        if (runs_on(spec, runner.facts)) {
          serving = nullptr;
          break;
        }
      }
      if (serving) {
        why = "the runners of key '" + request.key() + "' are '" + serving->facts.target() + "' with artifact ABI " +
              std::to_string(serving->facts.abi_version()) + ", and this job was built for '" + spec.target() +
              "' with ABI " + std::to_string(spec.abi_version()) +
              ": tune for the key's target (omit --target) with a Kiln of the runners' ABI";
      }
    }
    if (!why.empty()) {
      *response.add_rejected() = failure(job, v1::ARTIFACT_REJECTED, why);
      continue;
    }
    jobs_.emplace(id, std::move(job));
    queues_[request.key()].push_back(id);
    ++session.unresolved;
    ++submitted_;
    response.add_accepted_job_ids(spec.job_id());
  }
  erase_if_done(request.session_id());
  changed_.notify_all();
  return response;
}

bool Dispatcher::another_runner_of(const std::string &key, const std::string &runner_id, double now) const {
  for (const auto &[id, other] : runners_)
    if (id != runner_id && other.key == key && now - other.last_seen <= options_.runner_lost_after_seconds) return true;
  return false;
}

bool Dispatcher::runs_on(const v1::JobSpec &job, const v1::DeviceFacts &facts) {
  return (job.target().empty() || job.target() == facts.target()) &&
         (job.abi_version() == 0 || job.abi_version() == facts.abi_version());
}

bool Dispatcher::assign(const std::string &runner_id, Runner &runner, double now, v1::RunnerPollResponse &response) {
  auto queue = queues_.find(runner.key);
  if (queue == queues_.end()) return false;
  std::vector<std::string> skipped;
  struct PutBack {
    std::deque<std::string> &queue;
    std::vector<std::string> &ids;
    ~PutBack() { queue.insert(queue.begin(), ids.begin(), ids.end()); }
  } put_back{queue->second, skipped};
  while (!queue->second.empty()) {
    std::string id = queue->second.front();
    queue->second.pop_front();
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.state != JobState::kQueued) continue;  // cancelled or resolved
    Job &job = it->second;
    if (!runs_on(job.spec, runner.facts) ||
        (job.spec.avoid_runner() == runner_id && another_runner_of(runner.key, runner_id, now))) {
      // Built for another device or ABI than this runner's: left for one that matches
      // (the key's runners agree on their target, so this is a runner of another ABI).
      skipped.push_back(id);
      continue;
    }
    job.state = JobState::kLeased;
    job.lease_id = next_lease_id_++;
    job.runner_id = runner_id;
    job.leased_at = now;
    job.lease_confirmed = false;
    leases_[job.lease_id] = id;
    runner.leases.insert(job.lease_id);
    v1::Assignment *assignment = response.add_assignments();
    assignment->set_lease_id(job.lease_id);
    *assignment->mutable_job() = job.spec;
    return true;
  }
  return false;
}

v1::RunnerPollResponse Dispatcher::poll_runner(const v1::RunnerPollRequest &request,
                                               const std::function<bool()> &cancelled, std::string &refusal) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto wait_until =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(std::max(0.0, request.wait_seconds())));
  v1::RunnerPollResponse response;
  response.set_tracker_instance_id(instance_id_);
  response.set_heartbeat_seconds(options_.heartbeat_seconds);
  const std::string &runner_id = request.runner_id();
  double now = clock_();
  expire_locked(now);
  // Not expired while it waits here: the reference stays valid through the waits.
  Runner &runner = runners_[runner_id];
  if (runner.first_seen == 0) runner.first_seen = now;
  const std::string &process = request.process_id();
  if (!process.empty() && runner.replaced_processes.count(process)) {
    refusal = "another runner process took over the runner id '" + runner_id +
              "'; give every runner its own --runner-id (or --cache-dir, where the id is kept)";
    return response;
  }
  if (!process.empty() && !runner.process_id.empty() && runner.process_id != process) {
    // The runner restarted: whatever the old process held is lost.
    for (uint64_t lease : std::set<uint64_t>(runner.leases)) {
      auto job = leases_.find(lease);
      if (job != leases_.end()) lose_lease(jobs_.at(job->second), "the runner restarted");
    }
    if (runner.replaced_processes.size() > 64) runner.replaced_processes.clear();
    runner.replaced_processes.insert(runner.process_id);
  }
  // One key, one device: timings of boards of different kinds under one key would mix,
  // or their code would crash on each other's instructions.
  for (const auto &[other_id, other] : runners_) {
    if (other_id == runner_id || other.key != request.key() || other.facts.target().empty()) continue;
    if (other.facts.target() != request.facts().target()) {
      refusal = "the key '" + request.key() + "' is served by runners of target '" + other.facts.target() +
                "' (runner '" + other_id + "'), and this runner's target is '" + request.facts().target() +
                "': give it a key of its own (--key), one per kind of device";
      if (runner.last_seen == 0) runners_.erase(runner_id);
      return response;
    }
  }
  if (!process.empty()) runner.process_id = process;
  if (runner.key != request.key()) {
    // A runner that changed its key keeps nothing it was given under the old one.
    for (uint64_t lease : std::set<uint64_t>(runner.leases)) {
      auto job = leases_.find(lease);
      if (job != leases_.end()) lose_lease(jobs_.at(job->second), "the runner re-registered under another key");
    }
    runner.key = request.key();
  }
  runner.facts = request.facts();
  runner.last_seen = now;
  key_last_alive_[runner.key] = now;
  std::set<uint64_t> held(request.held_leases().begin(), request.held_leases().end());
  for (uint64_t lease : held) {
    auto job = leases_.find(lease);
    if (!runner.leases.count(lease) || job == leases_.end()) {
      response.add_revoked_leases(lease);
    } else {
      jobs_.at(job->second).lease_confirmed = true;
    }
  }
  for (uint64_t lease : std::set<uint64_t>(runner.leases)) {
    if (held.count(lease)) continue;
    // Assigned but not held: the runner never received the assignment (or restarted
    // without a process id).
    auto job = leases_.find(lease);
    if (job != leases_.end()) lose_lease(jobs_.at(job->second), "the runner no longer held the job");
    runner.leases.erase(lease);
  }
  if (runner.leases.empty() && response.revoked_leases().empty()) {
    ++runner.polling;
    for (;;) {
      if (cancelled && cancelled()) break;  // an assignment now would go to nobody
      if (assign(runner_id, runner, clock_(), response)) break;
      if (shutting_down_ || std::chrono::steady_clock::now() >= wait_until) break;
      changed_.wait_until(lock, std::min(wait_until, std::chrono::steady_clock::now() + kExpiryTick));
      runner.last_seen = clock_();
      key_last_alive_[runner.key] = runner.last_seen;
    }
    --runner.polling;
  }
  return response;
}

bool Dispatcher::report_result(const std::string &runner_id, v1::JobResult result) {
  std::lock_guard<std::mutex> lock(mutex_);
  double now = clock_();
  expire_locked(now);
  auto runner = runners_.find(runner_id);
  if (runner != runners_.end()) runner->second.last_seen = now;
  auto lease = leases_.find(result.lease_id());
  if (lease == leases_.end()) {
    ++stale_results_;
    return false;
  }
  Job &job = jobs_.at(lease->second);
  if (job.state != JobState::kLeased || job.lease_id != result.lease_id() || job.runner_id != runner_id ||
      job.spec.job_id() != result.job_id()) {
    ++stale_results_;
    return false;
  }
  if (result.code() == v1::RETRY) {
    leases_.erase(job.lease_id);
    if (runner != runners_.end()) runner->second.leases.erase(job.lease_id);
    if (++job.retries > options_.max_retries) {
      resolve(job, failure(job, v1::INTERNAL,
                           "runners could not run the job " + std::to_string(job.retries) +
                               " times; the last said: " + result.message()));
    } else {
      requeue(job);
    }
    return true;
  }
  if (runner != runners_.end()) {
    ++runner->second.done;
    if (result.code() != v1::OK) ++runner->second.failed;
    *result.mutable_runner_facts() = runner->second.facts;  // where the timings come from
  }
  result.set_runner_id(runner_id);
  resolve(job, std::move(result));
  return true;
}

void Dispatcher::resolve(Job &job, v1::JobResult result) {
  if (job.state == JobState::kLeased) {
    leases_.erase(job.lease_id);
    auto runner = runners_.find(job.runner_id);
    if (runner != runners_.end()) runner->second.leases.erase(job.lease_id);
  }
  if (result.message().size() > options_.max_message_bytes) {
    result.mutable_message()->resize(options_.max_message_bytes);
  }
  job.state = JobState::kResolved;
  job.result = std::move(result);
  Session &session = sessions_[job.session_id];
  session.resolved.push_back(job.spec.job_id());
  --session.unresolved;
  ++resolved_;
  changed_.notify_all();
}

void Dispatcher::lose_lease(Job &job, const std::string &why) {
  leases_.erase(job.lease_id);
  auto runner = runners_.find(job.runner_id);
  if (runner != runners_.end()) runner->second.leases.erase(job.lease_id);
  if (job.lease_confirmed) ++job.runner_losses;
  if (job.runner_losses >= options_.max_runner_losses) {
    resolve(job, failure(job, v1::RUNNER_LOST,
                         "the runner measuring this job was lost " + std::to_string(job.runner_losses) +
                             " times (last: runner '" + job.runner_id + "', " + why +
                             "); the kernel may take its device down, so it is not dispatched again"));
    return;
  }
  requeue(job);
}

void Dispatcher::requeue(Job &job) {
  job.state = JobState::kQueued;
  job.runner_id.clear();
  // Back to the front: it has waited its turn already.
  queues_[job.key].push_front(job_key(job.session_id, job.spec.job_id()));
  ++redispatches_;
  changed_.notify_all();
}

double Dispatcher::key_alive_at(const std::string &key, double now) const {
  for (const auto &[id, runner] : runners_) {
    if (runner.key == key) return now;
  }
  auto it = key_last_alive_.find(key);
  return it == key_last_alive_.end() ? 0 : it->second;
}

void Dispatcher::drop_session(const std::string &session_id) {
  std::string prefix = session_id + '\n';
  for (auto it = jobs_.lower_bound(prefix); it != jobs_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    Job &job = it->second;
    if (job.state == JobState::kLeased) {
      // The runner's next heartbeat learns that the lease is revoked.
      leases_.erase(job.lease_id);
      auto runner = runners_.find(job.runner_id);
      if (runner != runners_.end()) runner->second.leases.erase(job.lease_id);
    }
    it = jobs_.erase(it);  // queue entries of erased jobs are skipped when met
  }
  sessions_.erase(session_id);
}

void Dispatcher::erase_if_done(const std::string &session_id) {
  auto session = sessions_.find(session_id);
  if (session != sessions_.end() && session->second.resolved.empty() && session->second.unresolved == 0) {
    sessions_.erase(session);
  }
}

void Dispatcher::expire() {
  std::lock_guard<std::mutex> lock(mutex_);
  expire_locked(clock_());
}

void Dispatcher::expire_locked(double now) {
  for (auto it = runners_.begin(); it != runners_.end();) {
    Runner &runner = it->second;
    if (runner.polling > 0 || now - runner.last_seen <= options_.runner_lost_after_seconds) {
      ++it;
      continue;
    }
    std::string why = "no poll for " + std::to_string(static_cast<int>(now - runner.last_seen)) + " s";
    for (uint64_t lease : std::set<uint64_t>(runner.leases)) {
      auto job = leases_.find(lease);
      if (job != leases_.end()) lose_lease(jobs_.at(job->second), why);
    }
    it = runners_.erase(it);
  }
  for (auto &[lease, id] : std::map<uint64_t, std::string>(leases_)) {
    Job &job = jobs_.at(id);
    auto runner = runners_.find(job.runner_id);
    double runner_timeout = runner == runners_.end() ? 0 : runner->second.facts.run_timeout_seconds();
    double allowed = 2 * std::max(job.spec.run_timeout_seconds(), runner_timeout) + options_.lease_grace_seconds;
    if (now - job.leased_at > allowed) lose_lease(job, "the job ran far past its run timeout");
  }
  for (auto &[id, job] : jobs_) {
    if (job.state != JobState::kQueued) continue;
    double waiting_since = std::max(job.submitted_at, key_alive_at(job.key, now));
    if (now - waiting_since > job.queue_deadline_seconds) {
      resolve(job, failure(job, v1::NO_RUNNER,
                           "no runner of key '" + job.key + "' was connected to the tracker for " +
                               std::to_string(static_cast<int>(job.queue_deadline_seconds)) +
                               " s; start one with: kiln runner --tracker ADDR --key " + job.key));
    }
  }
  std::vector<std::string> idle;
  for (const auto &[id, session] : sessions_) {
    bool gone = session.hung_up_at > 0 && now - session.hung_up_at > options_.hang_up_grace_seconds;
    if (gone || now - session.last_seen > options_.session_idle_seconds) idle.push_back(id);
  }
  for (const std::string &id : idle) drop_session(id);
}

v1::PollResultsResponse Dispatcher::poll_results(const std::string &session_id, double wait_seconds,
                                                 const std::function<bool()> &hung_up) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto wait_until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                           std::chrono::duration<double>(std::max(0.0, wait_seconds)));
  v1::PollResultsResponse response;
  response.set_tracker_instance_id(instance_id_);
  expire_locked(clock_());
  for (;;) {
    auto session = sessions_.find(session_id);
    if (session == sessions_.end()) {
      response.set_session_dropped(true);
      break;
    }
    session->second.last_seen = clock_();
    session->second.hung_up_at = 0;
    if (hung_up && hung_up()) {
      session->second.hung_up_at = clock_();
      break;
    }
    if (!session->second.resolved.empty() || session->second.unresolved == 0) {
      for (const std::string &job_id : session->second.resolved) {
        if (response.results_size() >= options_.max_results_per_poll) break;
        *response.add_results() = jobs_.at(job_key(session_id, job_id)).result;
      }
      response.set_pending_jobs(static_cast<int32_t>(session->second.unresolved));
      break;
    }
    response.set_pending_jobs(static_cast<int32_t>(session->second.unresolved));
    if (shutting_down_ || std::chrono::steady_clock::now() >= wait_until) break;
    changed_.wait_until(lock, std::min(wait_until, std::chrono::steady_clock::now() + kExpiryTick));
  }
  return response;
}

void Dispatcher::ack_results(const std::string &session_id, const std::vector<std::string> &job_ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto session = sessions_.find(session_id);
  if (session == sessions_.end()) return;
  session->second.last_seen = clock_();
  session->second.hung_up_at = 0;
  std::set<std::string> acked(job_ids.begin(), job_ids.end());
  auto &resolved = session->second.resolved;
  for (auto it = resolved.begin(); it != resolved.end();) {
    if (acked.count(*it)) {
      jobs_.erase(job_key(session_id, *it));
      it = resolved.erase(it);
    } else {
      ++it;
    }
  }
  if (resolved.empty() && session->second.unresolved == 0) sessions_.erase(session);
}

int Dispatcher::cancel(const std::string &session_id, const std::vector<std::string> &job_ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> wanted(job_ids.begin(), job_ids.end());
  int cancelled = 0;
  for (auto &[id, job] : jobs_) {
    if (job.session_id != session_id || job.state == JobState::kResolved) continue;
    if (!wanted.empty() && !wanted.count(job.spec.job_id())) continue;
    // A running job's runner learns on its next poll that the lease is revoked.
    resolve(job, failure(job, v1::CANCELLED, "cancelled by the submitter"));
    ++cancelled;
  }
  return cancelled;
}

v1::GetTargetResponse Dispatcher::target_of(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex_);
  expire_locked(clock_());
  v1::GetTargetResponse response;
  double newest = -1;
  for (const auto &[id, runner] : runners_) {
    if (runner.key != key) continue;
    response.set_runners(response.runners() + 1);
    if (runner.last_seen > newest) {
      newest = runner.last_seen;
      response.set_target(runner.facts.target());
    }
  }
  return response;
}

Status Dispatcher::status() {
  std::lock_guard<std::mutex> lock(mutex_);
  double now = clock_();
  expire_locked(now);
  Status status;
  status.set_tracker_instance_id(instance_id_);
  status.set_uptime_seconds(now - started_at_);
  std::map<std::string, v1::KeyStatus> keys;
  for (const auto &[id, runner] : runners_) {
    v1::RunnerStatus *r = status.add_runners();
    r->set_runner_id(id);
    r->set_key(runner.key);
    *r->mutable_facts() = runner.facts;
    r->set_state(runner.leases.empty() ? "idle" : "busy");
    r->set_seconds_since_poll(now - runner.last_seen);
    r->set_jobs_done(runner.done);
    r->set_jobs_failed(runner.failed);
    double alive = now - runner.first_seen;
    r->set_jobs_per_second(alive > 0 ? static_cast<double>(runner.done) / alive : 0);
    if (!runner.leases.empty()) {
      auto job = leases_.find(*runner.leases.begin());
      if (job != leases_.end()) {
        const Job &j = jobs_.at(job->second);
        r->set_current_job(j.spec.label().empty() ? j.spec.job_id() : j.spec.label());
      }
    }
    v1::KeyStatus &key = keys[runner.key];
    key.set_key(runner.key);
    key.set_runners(key.runners() + 1);
  }
  for (const auto &[id, job] : jobs_) {
    if (job.state == JobState::kResolved) continue;
    v1::KeyStatus &key = keys[job.key];
    key.set_key(job.key);
    if (job.state == JobState::kQueued) {
      key.set_queued(key.queued() + 1);
      key.set_oldest_queued_seconds(std::max(key.oldest_queued_seconds(), now - job.submitted_at));
    } else {
      key.set_in_flight(key.in_flight() + 1);
    }
  }
  for (auto &[name, key] : keys) *status.add_keys() = key;
  status.set_jobs_submitted(submitted_);
  status.set_jobs_resolved(resolved_);
  status.set_redispatches(redispatches_);
  status.set_stale_results(stale_results_);
  return status;
}

std::set<std::string> Dispatcher::blobs_in_use() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> in_use;
  for (const auto &[id, job] : jobs_) {
    if (job.state == JobState::kResolved) continue;
    in_use.insert(job.spec.artifact().sha256());
    if (!job.spec.reference().sha256().empty()) in_use.insert(job.spec.reference().sha256());
  }
  return in_use;
}

void Dispatcher::shut_down() {
  std::lock_guard<std::mutex> lock(mutex_);
  shutting_down_ = true;
  changed_.notify_all();
}

}  // namespace kiln::tracker
