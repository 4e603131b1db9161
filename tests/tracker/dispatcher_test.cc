// The dispatcher's rules, driven directly with a fake clock: leases, re-dispatch after
// lost runners, results taken at most once, deadlines, cancel.
#include <gtest/gtest.h>

#include "tracker/dispatcher.h"

namespace kiln::tracker {
namespace {

class DispatcherTest : public ::testing::Test {
 protected:
  DispatcherTest()
      : dispatcher_(
            options(), [this] { return now_; }, "instance-1") {}

  static DispatcherOptions options() {
    DispatcherOptions o;
    o.runner_lost_after_seconds = 15;
    o.max_runner_losses = 2;
    o.default_queue_deadline_seconds = 100;
    return o;
  }

  static v1::Digest digest(char c) {
    v1::Digest d;
    d.set_sha256(std::string(64, c));
    d.set_size_bytes(10);
    return d;
  }

  v1::SubmitResponse submit(const std::vector<std::string> &ids, const std::string &session = "s",
                            const std::string &key = "cpu", const std::string &target = "", int abi = 0) {
    v1::SubmitRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_1);
    request.set_session_id(session);
    request.set_key(key);
    for (const std::string &id : ids) {
      v1::JobSpec *job = request.add_jobs();
      job->set_job_id(id);
      *job->mutable_artifact() = digest('a');
      job->set_run_timeout_seconds(10);
      job->set_target(target);
      job->set_abi_version(abi);
    }
    return dispatcher_.submit(request, [](const v1::Digest &d) { return d.sha256()[0] == 'a'; });
  }

  v1::RunnerPollResponse poll(const std::string &runner, std::vector<uint64_t> held = {},
                              const std::string &key = "cpu", const std::string &process = "",
                              const std::string &target = "llvm -mcpu=znver3", int abi = 2) {
    v1::RunnerPollRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_1);
    request.set_runner_id(runner);
    request.set_process_id(process.empty() ? runner + "-process" : process);
    request.set_key(key);
    request.mutable_facts()->set_target(target);
    request.mutable_facts()->set_abi_version(abi);
    request.mutable_facts()->set_hostname(runner + ".lan");
    for (uint64_t lease : held) request.add_held_leases(lease);
    request.set_wait_seconds(0);
    refusal_.clear();
    return dispatcher_.poll_runner(request, nullptr, refusal_);
  }

  /// Polls and confirms the assignment it gets, as a runner's first heartbeat does.
  v1::Assignment take(const std::string &runner, const std::string &key = "cpu") {
    auto response = poll(runner, {}, key);
    EXPECT_EQ(response.assignments_size(), 1);
    v1::Assignment assignment = response.assignments(0);
    poll(runner, {assignment.lease_id()}, key);
    return assignment;
  }

  bool report(const std::string &runner, const v1::Assignment &assignment, v1::ResultCode code = v1::OK) {
    v1::JobResult result;
    result.set_job_id(assignment.job().job_id());
    result.set_lease_id(assignment.lease_id());
    result.set_code(code);
    result.add_repeat_seconds(1e-3);
    return dispatcher_.report_result(runner, result);
  }

  double now_ = 1000;
  std::string refusal_;
  Dispatcher dispatcher_;
};

TEST_F(DispatcherTest, ARunnerGetsOneJobAtATimeAndItsResultReachesTheSession) {
  EXPECT_EQ(submit({"1", "2"}).accepted_job_ids_size(), 2);
  auto first = poll("r1");
  ASSERT_EQ(first.assignments_size(), 1);
  EXPECT_EQ(first.assignments(0).job().job_id(), "1");
  // Busy: a heartbeat with the lease gets no second job.
  EXPECT_EQ(poll("r1", {first.assignments(0).lease_id()}).assignments_size(), 0);
  EXPECT_TRUE(report("r1", first.assignments(0)));
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 1);
  EXPECT_EQ(results.results(0).job_id(), "1");
  EXPECT_EQ(results.results(0).runner_id(), "r1");
  EXPECT_EQ(results.pending_jobs(), 1);
  // Unacknowledged results are delivered again; acknowledged ones are forgotten.
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results_size(), 1);
  dispatcher_.ack_results("s", {"1"});
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results_size(), 0);
}

TEST_F(DispatcherTest, ResubmittingAJobIdIsANoOp) {
  submit({"1"});
  EXPECT_EQ(submit({"1"}).accepted_job_ids_size(), 1);
  ASSERT_EQ(poll("r1").assignments_size(), 1);
  EXPECT_EQ(poll("r2").assignments_size(), 0);
  EXPECT_EQ(dispatcher_.status().jobs_submitted(), 1);
}

TEST_F(DispatcherTest, JobsWithBlobsTheTrackerLacksAreRejected) {
  v1::SubmitRequest request;
  request.set_session_id("s");
  request.set_key("cpu");
  v1::JobSpec *job = request.add_jobs();
  job->set_job_id("x");
  *job->mutable_artifact() = digest('b');
  job->set_run_timeout_seconds(1);
  auto response = dispatcher_.submit(request, [](const v1::Digest &) { return false; });
  EXPECT_EQ(response.accepted_job_ids_size(), 0);
  ASSERT_EQ(response.rejected_size(), 1);
  EXPECT_EQ(response.rejected(0).code(), v1::ARTIFACT_REJECTED);
  EXPECT_NE(response.rejected(0).message().find("upload it first"), std::string::npos);
}

TEST_F(DispatcherTest, ASilentRunnerLosesItsJobToAnotherAndItsLateResultIsDiscarded) {
  submit({"1"});
  auto lost = take("r1");
  now_ += 16;  // r1 missed its heartbeats
  auto again = poll("r2");
  ASSERT_EQ(again.assignments_size(), 1);
  EXPECT_EQ(again.assignments(0).job().job_id(), "1");
  EXPECT_NE(again.assignments(0).lease_id(), lost.lease_id());
  EXPECT_FALSE(report("r1", lost));  // stale lease
  EXPECT_TRUE(report("r2", again.assignments(0)));
  EXPECT_FALSE(report("r2", again.assignments(0)));  // at most once
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 1);
  EXPECT_EQ(results.results(0).runner_id(), "r2");
  EXPECT_EQ(dispatcher_.status().redispatches(), 1);
  EXPECT_EQ(dispatcher_.status().stale_results(), 2);
}

TEST_F(DispatcherTest, ARestartedRunnerGivesItsJobBackAtOnceAndItsOldProcessIsRefused) {
  submit({"1"});
  auto first = take("r1");
  // Same runner id, another process: it restarted.
  auto second = poll("r1", {}, "cpu", "new-process");
  ASSERT_EQ(second.assignments_size(), 1);
  EXPECT_EQ(second.assignments(0).job().job_id(), "1");
  EXPECT_FALSE(report("r1", first));
  EXPECT_TRUE(report("r1", second.assignments(0)));
  // The replaced process polling again means two processes share the id.
  poll("r1", {}, "cpu", "r1-process");
  EXPECT_NE(refusal_.find("--runner-id"), std::string::npos) << refusal_;
}

TEST_F(DispatcherTest, AnAssignmentThatNeverArrivedIsNotARunnerLoss) {
  submit({"1"});
  for (int i = 0; i < 5; ++i) {
    // The reply carrying the assignment was lost: the runner polls holding nothing.
    ASSERT_EQ(poll("r1").assignments_size(), 1) << "attempt " << i;
  }
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results_size(), 0);
}

TEST_F(DispatcherTest, BusyRunnersNeverMakeQueuedJobsNoRunner) {
  submit({"1", "2"});
  auto running = take("r1");
  for (int i = 0; i < 30; ++i) {
    now_ += 10;  // 300 s, three times the queue deadline
    poll("r1", {running.lease_id()});
  }
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results_size(), 0);
  EXPECT_TRUE(report("r1", running));
  EXPECT_EQ(poll("r1").assignments(0).job().job_id(), "2");
}

TEST_F(DispatcherTest, JobsGivenBackForRetryAreQueuedAgainThenEndAsInternal) {
  submit({"1"});
  for (int i = 0; i <= options().max_retries; ++i) {
    auto a = take("r1");
    EXPECT_TRUE(report("r1", a, v1::RETRY));
  }
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 1);
  EXPECT_EQ(results.results(0).code(), v1::INTERNAL);
}

TEST_F(DispatcherTest, ASessionWhoseTunerWentAwayIsDroppedWithItsJobs) {
  submit({"1", "2"});
  auto running = take("r1");
  EXPECT_FALSE(dispatcher_.poll_results("s", 0).session_dropped());
  now_ += options().session_idle_seconds + 1;
  auto heartbeat = poll("r1", {running.lease_id()});
  // The tuner, back, learns that its jobs are gone (and submits them again) instead of
  // polling an empty session forever.
  v1::PollResultsResponse back = dispatcher_.poll_results("s", 0);
  EXPECT_TRUE(back.session_dropped());
  EXPECT_EQ(back.results_size(), 0);
  ASSERT_EQ(heartbeat.revoked_leases_size(), 1);
  EXPECT_EQ(poll("r2").assignments_size(), 0);
  EXPECT_EQ(dispatcher_.status().keys_size(), 1);  // the key's runners, no jobs
  EXPECT_EQ(dispatcher_.status().keys(0).queued(), 0);
}

// The status counts each key's queued and running jobs and the oldest wait from counts
// kept as jobs move (not by scanning every job): through leases, a lost runner's
// re-queue, results, a cancellation and a dropped session.
TEST_F(DispatcherTest, StatusCountsQueuedAndRunningJobsAsTheyMove) {
  auto key_status = [&] {
    const Status status = dispatcher_.status();
    for (const v1::KeyStatus &k : status.keys())
      if (k.key() == "cpu") return k;
    return v1::KeyStatus();
  };
  submit({"1", "2", "3"});
  now_ += 4;
  submit({"4"}, "t");
  EXPECT_EQ(key_status().queued(), 4);
  EXPECT_EQ(key_status().in_flight(), 0);
  EXPECT_DOUBLE_EQ(key_status().oldest_queued_seconds(), 4);
  auto first = take("r1");
  EXPECT_EQ(key_status().queued(), 3);
  EXPECT_EQ(key_status().in_flight(), 1);
  EXPECT_TRUE(report("r1", first));
  EXPECT_EQ(key_status().queued(), 3);
  EXPECT_EQ(key_status().in_flight(), 0);
  auto second = take("r1");
  EXPECT_EQ(key_status().in_flight(), 1);
  // The runner is lost: its job waits again, from its first submission.
  now_ += options().runner_lost_after_seconds + 1;
  dispatcher_.expire();
  EXPECT_EQ(key_status().queued(), 3);
  EXPECT_EQ(key_status().in_flight(), 0);
  EXPECT_GE(key_status().oldest_queued_seconds(), 4 + options().runner_lost_after_seconds);
  EXPECT_EQ(dispatcher_.cancel("s", {}), 2);
  EXPECT_EQ(key_status().queued(), 1);
  now_ += options().session_idle_seconds + 1;
  dispatcher_.expire();  // both sessions dropped
  EXPECT_EQ(key_status().queued(), 0);
  EXPECT_EQ(key_status().in_flight(), 0);
}

// A tuner that hung up while waiting (its process died) frees its boards after a short
// grace, not the session timeout; one that calls again within the grace keeps its jobs.
TEST_F(DispatcherTest, ASessionWhoseTunerHungUpIsDroppedAfterAGrace) {
  submit({"1", "2"});
  auto running = take("r1");
  dispatcher_.poll_results("s", 5, [] { return true; });  // the connection closed mid-wait
  now_ += options().hang_up_grace_seconds / 2;
  EXPECT_FALSE(dispatcher_.poll_results("s", 0).session_dropped()) << "a call within the grace keeps the session";
  dispatcher_.poll_results("s", 5, [] { return true; });
  now_ += options().hang_up_grace_seconds + 1;
  ASSERT_LT(options().hang_up_grace_seconds + 1, options().session_idle_seconds);
  auto heartbeat = poll("r1", {running.lease_id()});
  ASSERT_EQ(heartbeat.revoked_leases_size(), 1) << "the board still runs a dead tuner's job";
  EXPECT_EQ(dispatcher_.status().keys(0).queued(), 0);
  EXPECT_TRUE(dispatcher_.poll_results("s", 0).session_dropped());
}

// One key, one kind of device: a runner of another target is refused with the reason;
// a job built for another target or ABI than the key's runners is refused at
// submission instead of waiting for ever; results say which runner measured them.
TEST_F(DispatcherTest, JobsGoOnlyToRunnersOfTheirTargetAndAbi) {
  poll("zen3");
  poll("xeon", {}, "cpu", "", "llvm -mcpu=sapphirerapids");
  EXPECT_NE(refusal_.find("the key 'cpu' is served by runners of target 'llvm -mcpu=znver3'"), std::string::npos)
      << refusal_;
  EXPECT_NE(refusal_.find("give it a key of its own"), std::string::npos) << refusal_;
  EXPECT_EQ(dispatcher_.status().runners_size(), 1);

  v1::SubmitResponse other_target = submit({"1"}, "s", "cpu", "llvm -mcpu=sapphirerapids", 2);
  ASSERT_EQ(other_target.rejected_size(), 1);
  EXPECT_NE(other_target.rejected(0).message().find("are 'llvm -mcpu=znver3' with artifact ABI 2"), std::string::npos)
      << other_target.rejected(0).message();
  EXPECT_EQ(submit({"2"}, "s", "cpu", "llvm -mcpu=znver3", 1).rejected_size(), 1);  // an older ABI

  ASSERT_EQ(submit({"3"}, "s", "cpu", "llvm -mcpu=znver3", 2).accepted_job_ids_size(), 1);
  v1::Assignment job = take("zen3");
  EXPECT_EQ(job.job().target(), "llvm -mcpu=znver3");
  ASSERT_TRUE(report("zen3", job));
  v1::PollResultsResponse results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 1);
  EXPECT_EQ(results.results(0).runner_id(), "zen3");
  EXPECT_EQ(results.results(0).runner_facts().hostname(), "zen3.lan");
  EXPECT_EQ(results.results(0).runner_facts().target(), "llvm -mcpu=znver3");
}

// A re-timing meant for another device waits for another runner of the key while one is
// connected, and takes the first one when it is alone.
TEST_F(DispatcherTest, AJobAvoidsTheRunnerItNamesWhileAnotherCanTakeIt) {
  poll("first");
  poll("second");
  v1::SubmitRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_1);
  request.set_session_id("s");
  request.set_key("cpu");
  v1::JobSpec *job = request.add_jobs();
  job->set_job_id("retime");
  *job->mutable_artifact() = digest('a');
  job->set_run_timeout_seconds(10);
  job->set_avoid_runner("first");
  ASSERT_EQ(dispatcher_.submit(request, [](const v1::Digest &) { return true; }).accepted_job_ids_size(), 1);
  EXPECT_EQ(poll("first").assignments_size(), 0);
  v1::Assignment retime = take("second");
  EXPECT_EQ(retime.job().job_id(), "retime");
  ASSERT_TRUE(report("second", retime));

  job->set_job_id("alone");
  ASSERT_EQ(dispatcher_.submit(request, [](const v1::Digest &) { return true; }).accepted_job_ids_size(), 1);
  now_ += options().runner_lost_after_seconds + 1;  // "second" went silent
  poll("first", {}, "cpu", "first-process");        // (and "first" stays)
  EXPECT_EQ(take("first").job().job_id(), "alone");
}

TEST_F(DispatcherTest, ResultsAreDeliveredInPages) {
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(std::to_string(i));
  submit(ids);
  for (int i = 0; i < 300; ++i) EXPECT_TRUE(report("r1", poll("r1").assignments(0)));
  auto first = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(first.results_size(), options().max_results_per_poll);
  std::vector<std::string> acked;
  for (const auto &r : first.results()) acked.push_back(r.job_id());
  dispatcher_.ack_results("s", acked);
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results_size(), 300 - options().max_results_per_poll);
}

TEST_F(DispatcherTest, AJobThatKeepsLosingRunnersEndsAsRunnerLost) {
  submit({"killer", "fine"});
  take("r1");
  now_ += 16;
  take("r2");  // "killer" again (front of the queue)
  now_ += 16;
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 1);
  EXPECT_EQ(results.results(0).job_id(), "killer");
  EXPECT_EQ(results.results(0).code(), v1::RUNNER_LOST);
  // The other job still runs.
  auto next = poll("r3");
  ASSERT_EQ(next.assignments_size(), 1);
  EXPECT_EQ(next.assignments(0).job().job_id(), "fine");
}

TEST_F(DispatcherTest, AJobNoRunnerTakesEndsAsNoRunnerAtItsDeadline) {
  submit({"1"}, "s", "jetson");
  poll("r1");  // another key
  now_ += 101;
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 1);
  EXPECT_EQ(results.results(0).code(), v1::NO_RUNNER);
  EXPECT_NE(results.results(0).message().find("--key jetson"), std::string::npos);
}

TEST_F(DispatcherTest, CancelledJobsAreResolvedAndTheirLeasesRevoked) {
  submit({"1", "2"});
  auto running = take("r1");
  EXPECT_EQ(dispatcher_.cancel("s", {}), 2);
  auto heartbeat = poll("r1", {running.lease_id()});
  ASSERT_EQ(heartbeat.revoked_leases_size(), 1);
  EXPECT_EQ(heartbeat.revoked_leases(0), running.lease_id());
  EXPECT_FALSE(report("r1", running));
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 2);
  EXPECT_EQ(results.results(0).code(), v1::CANCELLED);
}

TEST_F(DispatcherTest, SessionsOnlySeeTheirOwnResultsAndKeysTheirOwnRunners) {
  submit({"1"}, "a", "cpu");
  submit({"1"}, "b", "arm");
  auto cpu = poll("x86", {}, "cpu");
  auto arm = poll("board", {}, "arm");
  ASSERT_EQ(cpu.assignments_size(), 1);
  ASSERT_EQ(arm.assignments_size(), 1);
  report("board", arm.assignments(0), v1::WRONG_RESULT);
  EXPECT_EQ(dispatcher_.poll_results("a", 0).results_size(), 0);
  auto b = dispatcher_.poll_results("b", 0);
  ASSERT_EQ(b.results_size(), 1);
  EXPECT_EQ(b.results(0).code(), v1::WRONG_RESULT);
  EXPECT_EQ(dispatcher_.target_of("arm").runners(), 1);
  EXPECT_EQ(dispatcher_.target_of("arm").target(), "llvm -mcpu=znver3");
  EXPECT_EQ(dispatcher_.target_of("gpu").runners(), 0);
}

TEST_F(DispatcherTest, LongResultMessagesAreCut) {
  submit({"1"});
  auto a = poll("r1").assignments(0);
  v1::JobResult result;
  result.set_job_id("1");
  result.set_lease_id(a.lease_id());
  result.set_code(v1::RUNTIME_ERROR);
  result.set_message(std::string(100000, 'x'));
  EXPECT_TRUE(dispatcher_.report_result("r1", result));
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results(0).message().size(), options().max_message_bytes);
}

// Two tuners sharing a key's boards take turns, whatever order their jobs came in; a
// job given back goes first again.
TEST_F(DispatcherTest, TunersSharingAKeyTakeTurns) {
  submit({"a1", "a2", "a3", "a4"}, "a");
  submit({"b1", "b2"}, "b");
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) {
    auto assignment = take("r1");
    order.push_back(assignment.job().job_id());
    ASSERT_TRUE(report("r1", assignment));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "a2", "b2", "a3", "a4"}));

  submit({"c1", "c2"}, "c");
  submit({"d1"}, "d");
  auto first = take("r1");
  EXPECT_EQ(first.job().job_id(), "c1");
  report("r1", first, v1::RETRY);
  EXPECT_EQ(take("r2").job().job_id(), "c1") << "a job given back keeps its place at the front";
}

// A waiting poll is a callback: it gets the job submitted while it waits, it ends at its
// deadline with nothing, and ends at once when its caller goes away; a runner waiting
// longer than the lost-runner timeout is not lost.
TEST_F(DispatcherTest, WaitingPollsAreAnsweredWhenAJobArrivesOrTheirWaitEnds) {
  v1::RunnerPollRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_1);
  request.set_runner_id("r1");
  request.set_key("cpu");
  request.mutable_facts()->set_target("llvm -mcpu=znver3");
  request.set_wait_seconds(60);
  std::vector<v1::RunnerPollResponse> answers;
  auto record = [&](v1::RunnerPollResponse response, std::string refusal) {
    EXPECT_EQ(refusal, "");
    answers.push_back(std::move(response));
  };
  Dispatcher::WaitId waiting = dispatcher_.start_runner_poll(request, record);
  ASSERT_NE(waiting, 0u);
  EXPECT_TRUE(answers.empty());
  now_ += options().runner_lost_after_seconds + 20;  // waiting longer than a lost runner's silence
  dispatcher_.expire();
  EXPECT_EQ(dispatcher_.status().runners_size(), 1) << "a runner waiting in a poll was taken for lost";
  submit({"1"});
  ASSERT_EQ(answers.size(), 1u) << "the job submitted did not reach the waiting runner";
  ASSERT_EQ(answers[0].assignments_size(), 1);
  EXPECT_EQ(answers[0].assignments(0).job().job_id(), "1");
  report("r1", answers[0].assignments(0));

  request.set_runner_id("r2");
  waiting = dispatcher_.start_runner_poll(request, record);
  now_ += 59;
  dispatcher_.expire();
  EXPECT_EQ(answers.size(), 1u);
  now_ += 2;
  dispatcher_.expire();
  ASSERT_EQ(answers.size(), 2u) << "the wait did not end at its deadline";
  EXPECT_EQ(answers[1].assignments_size(), 0);
  dispatcher_.end_wait(waiting, /*caller_gone=*/true);  // ended already: nothing happens
  EXPECT_EQ(answers.size(), 2u);

  waiting = dispatcher_.start_runner_poll(request, record);
  dispatcher_.end_wait(waiting, /*caller_gone=*/true);
  ASSERT_EQ(answers.size(), 3u);
  submit({"2"});
  EXPECT_EQ(answers.size(), 3u) << "a job went to a poll whose caller was gone";
  EXPECT_EQ(poll("r3").assignments(0).job().job_id(), "2");
}

// A tuner's waiting PollResults is answered by the result that resolves its job, and
// learns at once that its session was dropped.
TEST_F(DispatcherTest, WaitingResultPollsAreAnsweredByTheResult) {
  submit({"1"});
  std::vector<v1::PollResultsResponse> answers;
  auto record = [&](v1::PollResultsResponse response) { answers.push_back(std::move(response)); };
  ASSERT_NE(dispatcher_.start_poll_results("s", 30, record), 0u);
  auto assignment = take("r1");
  EXPECT_TRUE(answers.empty());
  now_ += 10;
  report("r1", assignment);
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_EQ(answers[0].results_size(), 1) << answers[0].DebugString();
  EXPECT_EQ(answers[0].pending_jobs(), 0);

  submit({"2"}, "t");
  ASSERT_NE(dispatcher_.start_poll_results("t", 60, record), 0u);
  dispatcher_.cancel("t", {});
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1].results(0).code(), v1::CANCELLED);
}

// Queue deadlines count from the key's last runner: jobs queued behind busy runners
// never time out, and time out once the key's runners have been gone for the deadline.
TEST_F(DispatcherTest, QueueDeadlinesCountFromTheKeysLastRunner) {
  auto busy = [&] { return poll("r1", {}, "cpu"); };
  submit({"1", "2", "3"});
  auto running = busy().assignments(0);
  for (int i = 0; i < 30; ++i) {
    now_ += 10;
    poll("r1", {running.lease_id()});
  }
  EXPECT_EQ(dispatcher_.status().keys(0).queued(), 2) << "queued jobs timed out while a runner served the key";
  report("r1", running);
  // The runner goes away: its key's jobs time out the deadline after its last poll.
  double last_poll = now_;
  now_ = last_poll + options().default_queue_deadline_seconds - 1;
  dispatcher_.expire();
  EXPECT_EQ(dispatcher_.poll_results("s", 0).results_size(), 1);
  now_ = last_poll + options().default_queue_deadline_seconds + 1;
  dispatcher_.expire();
  auto results = dispatcher_.poll_results("s", 0);
  ASSERT_EQ(results.results_size(), 3);
  EXPECT_EQ(results.results(1).code(), v1::NO_RUNNER);
  EXPECT_EQ(results.results(2).code(), v1::NO_RUNNER);
}

}  // namespace
}  // namespace kiln::tracker
