// A fuzz target for the tracker's message handling: the bytes are a script of
// protocol messages (an operation byte, a length, the serialized request), decoded as
// the service decodes them and applied to a dispatcher and a blob store. Any input must
// leave them consistent (nothing resolved that was not submitted, no result delivered
// twice once acknowledged); a crash, an exception or a sanitizer report is a finding.
// Built without KILN_LIBFUZZER, a test drives it with recorded scripts and
// deterministic mutations of them. Change the count: KILN_TRACKER_FUZZ_RUNS=<n>.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <google/protobuf/stubs/logging.h>

#include "rpc/digest.h"
#include "tracker/blob_store.h"
#include "tracker/dispatcher.h"

namespace {

using namespace kiln::tracker;

enum Op : uint8_t { kSubmit, kRunnerPoll, kReport, kPollResults, kAck, kCancel, kUpload, kTick, kOpCount };

// Applies one script; throws std::logic_error when an invariant breaks.
void run_script(const std::string &script) {
  // Bytes that are not UTF-8 in a string field are a refusal here, not news to log.
  google::protobuf::LogSilencer quiet;
  double now = 0;
  DispatcherOptions options;
  options.max_jobs_per_submit = 64;
  BlobStoreOptions blob_options;
  blob_options.max_blob_bytes = 4096;
  blob_options.max_total_bytes = 16384;
  blob_options.max_memory_blob_bytes = 1024;  // the larger blobs go through files
  BlobStore blobs(blob_options);
  Dispatcher dispatcher(
      options, [&] { return now; }, "fuzz", [&](const v1::Digest &digest, int delta) { blobs.pin(digest, delta); });
  size_t at = 0;
  while (at + 3 <= script.size()) {
    uint8_t op = static_cast<uint8_t>(script[at]) % kOpCount;
    size_t length = static_cast<uint8_t>(script[at + 1]) | static_cast<size_t>(static_cast<uint8_t>(script[at + 2]))
                                                               << 8;
    at += 3;
    std::string body = script.substr(at, length);
    at += body.size();
    switch (op) {
      case kSubmit: {
        v1::SubmitRequest request;
        if (!request.ParseFromString(body) || request.session_id().empty() || request.key().empty() ||
            request.jobs_size() > options.max_jobs_per_submit)
          break;
        dispatcher.submit(request, [&](const v1::Digest &d) { return blobs.contains(d); });
        break;
      }
      case kRunnerPoll: {
        v1::RunnerPollRequest request;
        if (!request.ParseFromString(body) || request.runner_id().empty() || request.key().empty()) break;
        request.set_wait_seconds(0);
        std::string refusal;
        dispatcher.poll_runner(request, nullptr, refusal);
        break;
      }
      case kReport: {
        v1::ReportResultRequest request;
        if (request.ParseFromString(body)) dispatcher.report_result(request.runner_id(), request.result());
        break;
      }
      case kPollResults: {
        v1::PollResultsRequest request;
        if (!request.ParseFromString(body)) break;
        v1::PollResultsResponse response = dispatcher.poll_results(request.session_id(), 0);
        if (response.pending_jobs() < 0) throw std::logic_error("a session has a negative number of pending jobs");
        break;
      }
      case kAck: {
        v1::AckResultsRequest request;
        if (!request.ParseFromString(body)) break;
        dispatcher.ack_results(request.session_id(), {request.job_ids().begin(), request.job_ids().end()});
        v1::PollResultsResponse after = dispatcher.poll_results(request.session_id(), 0);
        for (const auto &result : after.results()) {
          for (const auto &acked : request.job_ids()) {
            if (result.job_id() == acked) throw std::logic_error("an acknowledged result was delivered again");
          }
        }
        break;
      }
      case kCancel: {
        v1::CancelRequest request;
        if (request.ParseFromString(body))
          dispatcher.cancel(request.session_id(), {request.job_ids().begin(), request.job_ids().end()});
        break;
      }
      case kUpload: {
        // The body is the blob; uploaded under its own digest or, with a flipped bit,
        // under a digest it does not match.
        v1::Digest digest = kiln::rpc::digest_of(body);
        if (!body.empty() && (body[0] & 1)) digest.set_size_bytes(digest.size_bytes() + 1);
        bool stored = false;
        if (!blobs.check_upload(digest)) blobs.put(digest, body, &stored);
        break;
      }
      case kTick:
        now += body.empty() ? 1 : static_cast<uint8_t>(body[0]);
        dispatcher.expire();
        break;
    }
    Status status = dispatcher.status();
    if (status.jobs_resolved() > status.jobs_submitted()) throw std::logic_error("more jobs resolved than submitted");
    if (blobs.total_bytes() > 16384) throw std::logic_error("the blob store holds more than its cap");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  run_script(std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}

#ifndef KILN_LIBFUZZER
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "tests/common/fuzz_mutations.h"

namespace {

void append(std::string &script, Op op, const google::protobuf::Message &message) {
  std::string body = message.SerializeAsString();
  script += static_cast<char>(op);
  script += static_cast<char>(body.size() & 0xff);
  script += static_cast<char>(body.size() >> 8);
  script += body;
}

void append_raw(std::string &script, Op op, const std::string &body) {
  script += static_cast<char>(op);
  script += static_cast<char>(body.size() & 0xff);
  script += static_cast<char>(body.size() >> 8);
  script += body;
}

// A session's whole life: an upload, two submissions, two runners, results, a lost
// runner, acknowledgements and a cancel.
std::string recorded_script() {
  std::string script;
  std::string artifact =
      "\x7f"
      "ELF artifact bytes";
  append_raw(script, kUpload, artifact);
  v1::SubmitRequest submit;
  submit.set_protocol_version(v1::PROTOCOL_VERSION_1);
  submit.set_session_id("s");
  submit.set_key("cpu");
  for (const char *id : {"1", "2", "3"}) {
    v1::JobSpec *job = submit.add_jobs();
    job->set_job_id(id);
    *job->mutable_artifact() = kiln::rpc::digest_of(artifact);
    job->set_run_timeout_seconds(5);
  }
  append(script, kSubmit, submit);
  v1::RunnerPollRequest poll;
  poll.set_protocol_version(v1::PROTOCOL_VERSION_1);
  poll.set_runner_id("r1");
  poll.set_key("cpu");
  append(script, kRunnerPoll, poll);
  v1::ReportResultRequest report;
  report.set_runner_id("r1");
  report.mutable_result()->set_job_id("1");
  report.mutable_result()->set_lease_id(1);
  report.mutable_result()->set_code(v1::OK);
  append(script, kReport, report);
  append(script, kRunnerPoll, poll);
  append_raw(script, kTick, std::string(1, '\x20'));
  poll.set_runner_id("r2");
  append(script, kRunnerPoll, poll);
  report.set_runner_id("r2");
  report.mutable_result()->set_job_id("2");
  report.mutable_result()->set_lease_id(3);
  append(script, kReport, report);
  v1::PollResultsRequest results;
  results.set_session_id("s");
  append(script, kPollResults, results);
  v1::AckResultsRequest ack;
  ack.set_session_id("s");
  ack.add_job_ids("1");
  ack.add_job_ids("2");
  append(script, kAck, ack);
  v1::CancelRequest cancel;
  cancel.set_session_id("s");
  append(script, kCancel, cancel);
  append(script, kSubmit, submit);
  append_raw(script, kTick, std::string(1, '\xff'));
  append(script, kPollResults, results);
  return script;
}

TEST(TrackerFuzz, RecordedScriptsAndTheirMutationsKeepTheTrackerConsistent) {
  std::string seed = recorded_script();
  // scripts/fuzz's corpus starts from this recording: KILN_TRACKER_FUZZ_SEED=<file> writes it.
  if (const char *out = std::getenv("KILN_TRACKER_FUZZ_SEED")) std::ofstream(out, std::ios::binary) << seed;
  EXPECT_NO_THROW(run_script(seed));
  const char *env = std::getenv("KILN_TRACKER_FUZZ_RUNS");
  int runs = env ? std::atoi(env) : 20000;
  std::mt19937_64 rng(2024);
  std::string input = seed;
  for (int i = 0; i < runs; ++i) {
    // Mutations pile up for a while, then start again from the recording.
    input = i % 8 == 0 ? kiln::testing::mutate(seed, rng) : kiln::testing::mutate(input, rng);
    EXPECT_NO_THROW(run_script(input)) << "mutation " << i;
  }
}

}  // namespace
#endif
