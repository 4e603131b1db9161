#include "tracker/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>

namespace kiln::tracker {

/// The dispatcher's lock; the done-callbacks of polls completed while it was held run
/// after it is released (a callback finishes a gRPC call, which must not wait on us).
class Dispatcher::Locked {
 public:
  explicit Locked(Dispatcher &dispatcher) : dispatcher_(dispatcher), lock_(dispatcher.mutex_) {}
  ~Locked() {
    std::vector<std::function<void()>> done;
    done.swap(dispatcher_.completions_);
    lock_.unlock();
    for (auto &callback : done) callback();
  }
  Locked(const Locked &) = delete;
  Locked &operator=(const Locked &) = delete;

 private:
  Dispatcher &dispatcher_;
  std::unique_lock<std::mutex> lock_;
};

Dispatcher::Dispatcher(DispatcherOptions options, Clock clock, std::string instance_id, BlobPin pin_blob)
    : options_(options),
      clock_(std::move(clock)),
      instance_id_(std::move(instance_id)),
      pin_blob_(std::move(pin_blob)),
      started_at_(clock_()) {}

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

void Dispatcher::pin(const Job &job, int delta) {
  if (!pin_blob_) return;
  pin_blob_(job.spec.artifact(), delta);
  if (!job.spec.reference().sha256().empty()) pin_blob_(job.spec.reference(), delta);
}

bool Dispatcher::runs_on(const v1::JobSpec &job, const v1::DeviceFacts &facts) {
  return (job.target().empty() || job.target() == facts.target()) &&
         (job.abi_version() == 0 || job.abi_version() == facts.abi_version());
}

// ---------------------------------------------------------------------------------------
// Queues and deadlines

void Dispatcher::arm_deadline(Job &job, const std::string &id, double at) {
  disarm_deadline(job, id);
  job.deadline_check_at = at;
  queue_deadlines_.emplace(at, id);
}

void Dispatcher::disarm_deadline(Job &job, const std::string &id) {
  if (job.deadline_check_at >= 0) queue_deadlines_.erase({job.deadline_check_at, id});
  job.deadline_check_at = -1;
}

void Dispatcher::enqueue(Job &job, const std::string &id, bool front) {
  Key &key = keys_[job.key];
  auto &queue = key.queues[job.session_id];
  if (front && !queue.empty()) {
    // Its session's turn comes next (sessions are few: the scan is cheap).
    key.turns.erase(std::find(key.turns.begin(), key.turns.end(), job.session_id));
  }
  if (front) {
    key.turns.push_front(job.session_id);
  } else if (queue.empty()) {
    key.turns.push_back(job.session_id);
  }
  if (front) {
    queue.push_front(id);
  } else {
    queue.push_back(id);
  }
  arm_deadline(job, id, job.submitted_at + job.queue_deadline_seconds);
}

void Dispatcher::count_load(const Job &job, int delta) {
  if (job.state == JobState::kResolved) return;
  KeyLoad &load = load_[job.key];
  if (job.state == JobState::kLeased) {
    load.in_flight += delta;
  } else if (delta > 0) {
    load.queued_since.insert(job.submitted_at);
  } else {
    load.queued_since.erase(load.queued_since.find(job.submitted_at));
  }
  if (load.in_flight == 0 && load.queued_since.empty()) load_.erase(job.key);
}

void Dispatcher::set_state(Job &job, JobState state) {
  count_load(job, -1);
  job.state = state;
  count_load(job, +1);
}

void Dispatcher::requeue(Job &job) {
  set_state(job, JobState::kQueued);
  job.runner_id.clear();
  // Back to the front of its session's queue, and its session's turn next: it has
  // waited its turn already.
  enqueue(job, job_key(job.session_id, job.spec.job_id()), /*front=*/true);
  ++redispatches_;
  dispatch(job.key, clock_());
}

bool Dispatcher::assign(const std::string &runner_id, Runner &runner, double now, v1::RunnerPollResponse &response) {
  auto key_it = keys_.find(runner.key);
  if (key_it == keys_.end()) return false;
  Key &key = key_it->second;
  std::vector<std::string> skipped;  // job keys this runner may not run, put back in order
  bool assigned = false;
  while (!key.turns.empty()) {
    std::string session = key.turns.front();
    key.turns.pop_front();
    auto queue = key.queues.find(session);
    std::string id = queue->second.front();
    queue->second.pop_front();
    if (queue->second.empty()) {
      key.queues.erase(queue);
    } else {
      key.turns.push_back(session);
    }
    auto it = jobs_.find(id);
    // Entries of cancelled, resolved or dropped jobs are skipped when met.
    if (it == jobs_.end() || it->second.state != JobState::kQueued || it->second.key != runner.key) continue;
    Job &job = it->second;
    if (!runs_on(job.spec, runner.facts) || (job.spec.avoid_runner() == runner_id && key.runners.size() > 1)) {
      // Built for another ABI than this runner's, or a confirmation that wants another
      // runner of the key: left for one that matches.
      skipped.push_back(id);
      continue;
    }
    disarm_deadline(job, id);
    set_state(job, JobState::kLeased);
    job.lease_id = next_lease_id_++;
    job.runner_id = runner_id;
    job.leased_at = now;
    job.lease_confirmed = false;
    double allowed =
        2 * std::max(job.spec.run_timeout_seconds(), runner.facts.run_timeout_seconds()) + options_.lease_grace_seconds;
    job.lease_deadline = now + allowed;
    lease_deadlines_.emplace(job.lease_deadline, job.lease_id);
    leases_[job.lease_id] = id;
    runner.leases.insert(job.lease_id);
    v1::Assignment *assignment = response.add_assignments();
    assignment->set_lease_id(job.lease_id);
    *assignment->mutable_job() = job.spec;
    assigned = true;
    break;
  }
  for (auto id = skipped.rbegin(); id != skipped.rend(); ++id) {
    const Job &job = jobs_.at(*id);
    auto &queue = key.queues[job.session_id];
    if (queue.empty()) key.turns.push_front(job.session_id);
    queue.push_front(*id);
  }
  return assigned;
}

void Dispatcher::dispatch(const std::string &key_name, double now) {
  auto key_it = keys_.find(key_name);
  if (key_it == keys_.end()) return;
  Key &key = key_it->second;
  // Each waiting runner is offered the queue once, oldest first; one that can take
  // nothing (another ABI) keeps waiting.
  for (auto it = key.waiters.begin(); it != key.waiters.end() && !key.turns.empty();) {
    WaitId id = *it++;
    RunnerWait &wait = runner_waits_.at(id);
    auto runner = runners_.find(wait.runner_id);
    if (runner == runners_.end() || runner->second.key != key_name) {
      finish_runner_wait(id, now);  // re-registered elsewhere meanwhile
    } else if (assign(runner->first, runner->second, now, wait.response)) {
      finish_runner_wait(id, now);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Runners

void Dispatcher::touch_runner(const std::string &runner_id, Runner &runner, double now) {
  if (runner.polling == 0) runner_expiry_.erase({runner.last_seen, runner_id});
  runner.last_seen = now;
  if (runner.polling == 0) runner_expiry_.emplace(now, runner_id);
  if (!runner.key.empty()) {
    Key &key = keys_[runner.key];
    key.last_alive = std::max(key.last_alive, now);
  }
}

void Dispatcher::set_runner_key(const std::string &runner_id, Runner &runner, const std::string &key_name,
                                const v1::DeviceFacts &facts) {
  if (!runner.key.empty()) {
    Key &old = keys_[runner.key];
    auto entry = old.facts.find({runner.facts.target(), runner.facts.abi_version()});
    if (entry != old.facts.end() && --entry->second == 0) old.facts.erase(entry);
    if (runner.key != key_name) {
      old.runners.erase(runner_id);
      if (old.runners.empty()) {
        // The key lost its last runner: its parked jobs' deadlines run again, counted
        // from its last poll.
        for (const std::string &id : old.parked) {
          auto job = jobs_.find(id);
          if (job == jobs_.end() || job->second.state != JobState::kQueued || job->second.deadline_check_at >= 0)
            continue;
          arm_deadline(job->second, id,
                       std::max(job->second.submitted_at, old.last_alive) + job->second.queue_deadline_seconds);
        }
        old.parked.clear();
      }
    }
  }
  runner.key = key_name;
  runner.facts = facts;
  if (!key_name.empty()) {
    Key &key = keys_[key_name];
    key.runners.insert(runner_id);
    ++key.facts[{facts.target(), facts.abi_version()}];
  }
}

void Dispatcher::erase_runner(const std::string &runner_id, const std::string &why) {
  auto it = runners_.find(runner_id);
  if (it == runners_.end()) return;
  Runner &runner = it->second;
  for (uint64_t lease : std::set<uint64_t>(runner.leases)) {
    auto job = leases_.find(lease);
    if (job != leases_.end()) lose_lease(jobs_.at(job->second), why);
  }
  if (runner.polling == 0) runner_expiry_.erase({runner.last_seen, runner_id});
  set_runner_key(runner_id, runner, "", {});
  runners_.erase(it);
}

Dispatcher::WaitId Dispatcher::start_runner_poll(const v1::RunnerPollRequest &request, RunnerPollDone done) {
  Locked lock(*this);
  v1::RunnerPollResponse response;
  response.set_tracker_instance_id(instance_id_);
  response.set_heartbeat_seconds(options_.heartbeat_seconds);
  auto reply = [&](std::string refusal) {
    completions_.push_back([done = std::move(done), response = std::move(response),
                            refusal = std::move(refusal)]() mutable { done(std::move(response), std::move(refusal)); });
    return WaitId{0};
  };
  const std::string &runner_id = request.runner_id();
  double now = clock_();
  expire_locked(now);
  auto [runner_it, is_new] = runners_.try_emplace(runner_id);
  Runner &runner = runner_it->second;
  if (is_new) runner.first_seen = now;
  const std::string &process = request.process_id();
  if (!process.empty() && runner.replaced_processes.count(process)) {
    return reply("another runner process took over the runner id '" + runner_id +
                 "'; give every runner its own --runner-id (or --cache-dir, where the id is kept)");
  }
  // One key, one device: timings of boards of different kinds under one key would mix,
  // or their code would crash on each other's instructions.
  auto key_it = keys_.find(request.key());
  if (key_it != keys_.end()) {
    for (const auto &entry : key_it->second.facts) {
      const std::string &target = entry.first.first;
      if (target.empty() || target == request.facts().target()) continue;
      std::string other_id;
      for (const std::string &id : key_it->second.runners) {
        if (id != runner_id && runners_.at(id).facts.target() == target) other_id = id;
      }
      if (other_id.empty()) continue;
      if (is_new) runners_.erase(runner_it);
      return reply("the key '" + request.key() + "' is served by runners of target '" + target + "' (runner '" +
                   other_id + "'), and this runner's target is '" + request.facts().target() +
                   "': give it a key of its own (--key), one per kind of device");
    }
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
  if (!process.empty()) runner.process_id = process;
  if (runner.key != request.key()) {
    // A runner that changed its key keeps nothing it was given under the old one.
    for (uint64_t lease : std::set<uint64_t>(runner.leases)) {
      auto job = leases_.find(lease);
      if (job != leases_.end()) lose_lease(jobs_.at(job->second), "the runner re-registered under another key");
    }
  }
  set_runner_key(runner_id, runner, request.key(), request.facts());
  touch_runner(runner_id, runner, now);
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
  if (!runner.leases.empty() || !response.revoked_leases().empty() || assign(runner_id, runner, now, response) ||
      shutting_down_ || request.wait_seconds() <= 0) {
    return reply("");
  }
  WaitId id = next_wait_id_++;
  if (runner.polling++ == 0) runner_expiry_.erase({runner.last_seen, runner_id});
  double deadline = now + request.wait_seconds();
  runner_waits_.emplace(id, RunnerWait{runner_id, runner.key, deadline, std::move(response), std::move(done)});
  wait_deadlines_.emplace(deadline, id);
  keys_[runner.key].waiters.insert(id);
  return id;
}

void Dispatcher::finish_runner_wait(WaitId id, double now) {
  auto wait = runner_waits_.find(id);
  if (wait == runner_waits_.end()) return;
  wait_deadlines_.erase({wait->second.deadline, id});
  keys_[wait->second.key].waiters.erase(id);
  auto runner = runners_.find(wait->second.runner_id);
  if (runner != runners_.end()) {
    // A waiting poll is a sign of life until it ends.
    --runner->second.polling;
    touch_runner(runner->first, runner->second, std::max(runner->second.last_seen, now));
  }
  completions_.push_back([done = std::move(wait->second.done), response = std::move(wait->second.response)]() mutable {
    done(std::move(response), "");
  });
  runner_waits_.erase(wait);
}

bool Dispatcher::report_result(const std::string &runner_id, v1::JobResult result) {
  Locked lock(*this);
  double now = clock_();
  expire_locked(now);
  auto runner = runners_.find(runner_id);
  if (runner != runners_.end()) touch_runner(runner_id, runner->second, now);
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
    end_lease(job);
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

// ---------------------------------------------------------------------------------------
// Jobs

v1::SubmitResponse Dispatcher::submit(const v1::SubmitRequest &request,
                                      const std::function<bool(const v1::Digest &)> &has_blob) {
  Locked lock(*this);
  double now = clock_();
  expire_locked(now);
  v1::SubmitResponse response;
  response.set_tracker_instance_id(instance_id_);
  double deadline_seconds =
      request.queue_deadline_seconds() > 0 ? request.queue_deadline_seconds() : options_.default_queue_deadline_seconds;
  Session &session = sessions_[request.session_id()];
  session.last_seen = now;
  session.hung_up_at = 0;
  const Key *key = nullptr;
  if (auto it = keys_.find(request.key()); it != keys_.end()) key = &it->second;
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
    } else if (key) {
      // The key's runners are one device (start_runner_poll sees to it): a job built for
      // another target or ABI would wait for a runner that never comes.
      const std::pair<std::string, int64_t> *serving = nullptr;
      for (const auto &entry : key->facts) {
        if (entry.first.first.empty()) continue;
        v1::DeviceFacts facts;
        facts.set_target(entry.first.first);
        facts.set_abi_version(entry.first.second);
        serving = &entry.first;
        if (runs_on(spec, facts)) {
          serving = nullptr;
          break;
        }
      }
      if (serving) {
        why = "the runners of key '" + request.key() + "' are '" + serving->first + "' with artifact ABI " +
              std::to_string(serving->second) + ", and this job was built for '" + spec.target() + "' with ABI " +
              std::to_string(spec.abi_version()) +
              ": tune for the key's target (omit --target) with a Kiln of the runners' ABI";
      }
    }
    if (!why.empty()) {
      *response.add_rejected() = failure(job, v1::ARTIFACT_REJECTED, why);
      continue;
    }
    Job &stored = jobs_.emplace(id, std::move(job)).first->second;
    count_load(stored, +1);
    pin(stored, +1);
    enqueue(stored, id, /*front=*/false);
    ++session.unresolved;
    ++submitted_;
    response.add_accepted_job_ids(spec.job_id());
  }
  erase_if_done(request.session_id());
  dispatch(request.key(), now);
  return response;
}

void Dispatcher::end_lease(Job &job) {
  leases_.erase(job.lease_id);
  lease_deadlines_.erase({job.lease_deadline, job.lease_id});
  auto runner = runners_.find(job.runner_id);
  if (runner != runners_.end()) runner->second.leases.erase(job.lease_id);
}

void Dispatcher::resolve(Job &job, v1::JobResult result) {
  if (job.state == JobState::kLeased) end_lease(job);
  disarm_deadline(job, job_key(job.session_id, job.spec.job_id()));
  if (result.message().size() > options_.max_message_bytes) {
    result.mutable_message()->resize(options_.max_message_bytes);
  }
  set_state(job, JobState::kResolved);
  job.result = std::move(result);
  pin(job, -1);
  Session &session = sessions_[job.session_id];
  session.resolved.push_back(job.spec.job_id());
  --session.unresolved;
  ++resolved_;
  notify_session(job.session_id);
}

void Dispatcher::lose_lease(Job &job, const std::string &why) {
  end_lease(job);
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

void Dispatcher::drop_session(const std::string &session_id) {
  std::string prefix = session_id + '\n';
  for (auto it = jobs_.lower_bound(prefix); it != jobs_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    Job &job = it->second;
    // The runner's next heartbeat learns that the lease is revoked.
    if (job.state == JobState::kLeased) end_lease(job);
    if (job.state != JobState::kResolved) pin(job, -1);
    count_load(job, -1);
    disarm_deadline(job, it->first);
    it = jobs_.erase(it);  // queue entries of erased jobs are skipped when met
  }
  auto session = sessions_.find(session_id);
  if (session == sessions_.end()) return;
  std::set<WaitId> waiters = std::move(session->second.waiters);
  sessions_.erase(session);
  for (WaitId id : waiters) finish_results_wait(id);  // they learn that it was dropped
}

void Dispatcher::erase_if_done(const std::string &session_id) {
  auto session = sessions_.find(session_id);
  if (session != sessions_.end() && session->second.resolved.empty() && session->second.unresolved == 0 &&
      session->second.waiters.empty()) {
    sessions_.erase(session);
  }
}

void Dispatcher::expire() {
  Locked lock(*this);
  expire_locked(clock_());
}

void Dispatcher::expire_locked(double now) {
  while (!runner_expiry_.empty() && now - runner_expiry_.begin()->first > options_.runner_lost_after_seconds) {
    auto [last_seen, id] = *runner_expiry_.begin();
    erase_runner(id, "no poll for " + std::to_string(static_cast<int>(now - last_seen)) + " s");
  }
  while (!lease_deadlines_.empty() && lease_deadlines_.begin()->first < now) {
    uint64_t lease = lease_deadlines_.begin()->second;
    lease_deadlines_.erase(lease_deadlines_.begin());
    auto id = leases_.find(lease);
    if (id != leases_.end()) lose_lease(jobs_.at(id->second), "the job ran far past its run timeout");
  }
  while (!queue_deadlines_.empty() && queue_deadlines_.begin()->first < now) {
    std::string id = queue_deadlines_.begin()->second;
    queue_deadlines_.erase(queue_deadlines_.begin());
    Job &job = jobs_.at(id);
    job.deadline_check_at = -1;
    Key &key = keys_[job.key];
    if (!key.runners.empty()) {
      // Busy runners working through a long queue never time it out.
      key.parked.push_back(id);
      continue;
    }
    double waiting_since = std::max(job.submitted_at, key.last_alive);
    if (now - waiting_since > job.queue_deadline_seconds) {
      resolve(job, failure(job, v1::NO_RUNNER,
                           "no runner of key '" + job.key + "' was connected to the tracker for " +
                               std::to_string(static_cast<int>(job.queue_deadline_seconds)) +
                               " s; start one with: kiln runner --tracker ADDR --key " + job.key));
    } else {
      arm_deadline(job, id, waiting_since + job.queue_deadline_seconds);
    }
  }
  while (!wait_deadlines_.empty() && wait_deadlines_.begin()->first <= now) {
    WaitId id = wait_deadlines_.begin()->second;
    if (runner_waits_.count(id)) {
      finish_runner_wait(id, now);
    } else {
      wait_deadlines_.erase(wait_deadlines_.begin());
      finish_results_wait(id);
    }
  }
  // Sessions are tuners: a handful, so a scan costs nothing.
  std::vector<std::string> idle;
  for (const auto &[id, session] : sessions_) {
    bool gone = session.hung_up_at > 0 && now - session.hung_up_at > options_.hang_up_grace_seconds;
    bool silent = session.waiters.empty() && now - session.last_seen > options_.session_idle_seconds;
    if (gone || silent) idle.push_back(id);
  }
  for (const std::string &id : idle) drop_session(id);
}

// ---------------------------------------------------------------------------------------
// Tuners' sessions

v1::PollResultsResponse Dispatcher::results_of(const std::string &session_id) {
  v1::PollResultsResponse response;
  response.set_tracker_instance_id(instance_id_);
  auto session = sessions_.find(session_id);
  if (session == sessions_.end()) {
    response.set_session_dropped(true);
    return response;
  }
  for (const std::string &job_id : session->second.resolved) {
    if (response.results_size() >= options_.max_results_per_poll) break;
    *response.add_results() = jobs_.at(job_key(session_id, job_id)).result;
  }
  response.set_pending_jobs(static_cast<int32_t>(session->second.unresolved));
  return response;
}

void Dispatcher::notify_session(const std::string &session_id) {
  auto session = sessions_.find(session_id);
  if (session == sessions_.end()) return;
  std::set<WaitId> waiters = std::move(session->second.waiters);
  session->second.waiters.clear();
  for (WaitId id : waiters) finish_results_wait(id);
}

void Dispatcher::finish_results_wait(WaitId id) {
  auto wait = results_waits_.find(id);
  if (wait == results_waits_.end()) return;
  wait_deadlines_.erase({wait->second.deadline, id});
  auto session = sessions_.find(wait->second.session_id);
  if (session != sessions_.end()) {
    session->second.waiters.erase(id);
    session->second.last_seen = clock_();
  }
  completions_.push_back([done = std::move(wait->second.done),
                          response = results_of(wait->second.session_id)]() mutable { done(std::move(response)); });
  results_waits_.erase(wait);
}

Dispatcher::WaitId Dispatcher::start_poll_results(const std::string &session_id, double wait_seconds,
                                                  ResultsDone done) {
  Locked lock(*this);
  double now = clock_();
  expire_locked(now);
  auto session = sessions_.find(session_id);
  if (session != sessions_.end()) {
    session->second.last_seen = now;
    session->second.hung_up_at = 0;
  }
  bool ready = session == sessions_.end() || !session->second.resolved.empty() || session->second.unresolved == 0;
  if (ready || shutting_down_ || wait_seconds <= 0) {
    completions_.push_back(
        [done = std::move(done), response = results_of(session_id)]() mutable { done(std::move(response)); });
    return 0;
  }
  WaitId id = next_wait_id_++;
  double deadline = now + wait_seconds;
  results_waits_.emplace(id, ResultsWait{session_id, deadline, std::move(done)});
  wait_deadlines_.emplace(deadline, id);
  session->second.waiters.insert(id);
  return id;
}

void Dispatcher::end_wait(WaitId id, bool caller_gone) {
  Locked lock(*this);
  double now = clock_();
  if (runner_waits_.count(id)) {
    finish_runner_wait(id, now);
    return;
  }
  auto wait = results_waits_.find(id);
  if (wait == results_waits_.end()) return;
  if (caller_gone) {
    auto session = sessions_.find(wait->second.session_id);
    finish_results_wait(id);
    if (session != sessions_.end()) session->second.hung_up_at = now;
    return;
  }
  finish_results_wait(id);
}

namespace {

/// Runs a long poll to completion on the calling thread.
template <typename Response>
class Blocking {
 public:
  std::function<void(Response)> callback() {
    return [this](Response response) {
      std::lock_guard<std::mutex> lock(mutex_);
      response_ = std::move(response);
      done_ = true;
      ready_.notify_all();
    };
  }
  /// Waits until done, checking `gone` and the real-time limit while it waits.
  Response wait(double seconds, const std::function<bool()> &gone, const std::function<void(bool caller_gone)> &end) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(std::max(0.0, seconds)));
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      ready_.wait_for(lock, std::chrono::milliseconds(20));
      if (done_) break;
      lock.unlock();
      if (gone && gone()) {
        end(true);
      } else if (std::chrono::steady_clock::now() >= until) {
        end(false);
      }
      lock.lock();
    }
    return std::move(response_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  bool done_ = false;
  Response response_;
};

}  // namespace

v1::RunnerPollResponse Dispatcher::poll_runner(const v1::RunnerPollRequest &request,
                                               const std::function<bool()> &cancelled, std::string &refusal) {
  Blocking<std::pair<v1::RunnerPollResponse, std::string>> blocking;
  auto deliver = blocking.callback();
  WaitId id = start_runner_poll(request, [&deliver](v1::RunnerPollResponse response, std::string why) {
    deliver({std::move(response), std::move(why)});
  });
  auto [response, why] =
      blocking.wait(request.wait_seconds(), cancelled, [this, id](bool gone) { end_wait(id, gone); });
  refusal = std::move(why);
  return response;
}

v1::PollResultsResponse Dispatcher::poll_results(const std::string &session_id, double wait_seconds,
                                                 const std::function<bool()> &hung_up) {
  Blocking<v1::PollResultsResponse> blocking;
  WaitId id = start_poll_results(session_id, wait_seconds, blocking.callback());
  return blocking.wait(wait_seconds, hung_up, [this, id](bool gone) { end_wait(id, gone); });
}

void Dispatcher::ack_results(const std::string &session_id, const std::vector<std::string> &job_ids) {
  Locked lock(*this);
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
  erase_if_done(session_id);
}

int Dispatcher::cancel(const std::string &session_id, const std::vector<std::string> &job_ids) {
  Locked lock(*this);
  std::set<std::string> wanted(job_ids.begin(), job_ids.end());
  int cancelled = 0;
  std::string prefix = session_id + '\n';
  for (auto it = jobs_.lower_bound(prefix); it != jobs_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    Job &job = it->second;
    if (job.state == JobState::kResolved) continue;
    if (!wanted.empty() && !wanted.count(job.spec.job_id())) continue;
    // A running job's runner learns on its next poll that the lease is revoked.
    resolve(job, failure(job, v1::CANCELLED, "cancelled by the submitter"));
    ++cancelled;
  }
  return cancelled;
}

// ---------------------------------------------------------------------------------------
// Reports

v1::GetTargetResponse Dispatcher::target_of(const std::string &key_name) {
  Locked lock(*this);
  expire_locked(clock_());
  v1::GetTargetResponse response;
  auto key = keys_.find(key_name);
  if (key == keys_.end()) return response;
  double newest = -1;
  for (const std::string &id : key->second.runners) {
    const Runner &runner = runners_.at(id);
    response.set_runners(response.runners() + 1);
    if (runner.last_seen > newest) {
      newest = runner.last_seen;
      response.set_target(runner.facts.target());
    }
  }
  return response;
}

Status Dispatcher::status() {
  Locked lock(*this);
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
    r->set_seconds_since_poll(runner.polling > 0 ? 0 : now - runner.last_seen);
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
  // From the counts kept as jobs change state: a status costs the runners and keys, not
  // the jobs (a long queue made every `kiln tracker status` scan all of them).
  for (const auto &[name, load] : load_) {
    v1::KeyStatus &key = keys[name];
    key.set_key(name);
    key.set_queued(static_cast<int32_t>(load.queued_since.size()));
    key.set_in_flight(static_cast<int32_t>(load.in_flight));
    if (!load.queued_since.empty()) key.set_oldest_queued_seconds(now - *load.queued_since.begin());
  }
  for (auto &[name, key] : keys) *status.add_keys() = key;
  status.set_jobs_submitted(submitted_);
  status.set_jobs_resolved(resolved_);
  status.set_redispatches(redispatches_);
  status.set_stale_results(stale_results_);
  return status;
}

void Dispatcher::shut_down() {
  Locked lock(*this);
  shutting_down_ = true;
  double now = clock_();
  while (!runner_waits_.empty()) finish_runner_wait(runner_waits_.begin()->first, now);
  while (!results_waits_.empty()) finish_results_wait(results_waits_.begin()->first);
}

}  // namespace kiln::tracker
