#include "rpc/remote_runner.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "rpc/blob_transfer.h"
#include "rpc/digest.h"

namespace kiln::rpc {

namespace fs = std::filesystem;

namespace {

constexpr double kCallTimeoutSeconds = 60;
constexpr double kResultWaitSeconds = 10;

measure::ErrorKind error_kind_of(v1::ResultCode code) {
  switch (code) {
    case v1::OK:
      return measure::ErrorKind::kNone;
    case v1::LOAD_ERROR:
      return measure::ErrorKind::kLoadError;
    case v1::RUN_TIMEOUT:
      return measure::ErrorKind::kRunTimeout;
    case v1::WRONG_RESULT:
      return measure::ErrorKind::kWrongResult;
    // The tracker or runner refused the artifact (another target, a missing blob, a
    // digest mismatch): the measurement failed, not the program.
    case v1::ARTIFACT_REJECTED:
    case v1::RUNNER_LOST:
    case v1::INTERNAL:
    case v1::CANCELLED:
      return measure::ErrorKind::kInfrastructure;
    default:
      return measure::ErrorKind::kRuntimeError;
  }
}

measure::RunResult run_result_of(const v1::JobResult &job) {
  measure::RunResult result;
  result.error = error_kind_of(job.code());
  result.message = job.message();
  if (job.code() == v1::RUNNER_LOST || job.code() == v1::ARTIFACT_REJECTED || job.code() == v1::INTERNAL ||
      job.code() == v1::CANCELLED) {
    result.message = v1::ResultCode_Name(job.code()) + ": " + result.message;
  }
  result.repeat_seconds.assign(job.repeat_seconds().begin(), job.repeat_seconds().end());
  result.number = job.number();
  result.calibration_calls = job.calibration_calls();
  result.run_seconds = job.run_seconds();
  if (!job.runner_id().empty()) {
    nlohmann::json by = {{"runner", job.runner_id()}};
    const v1::DeviceFacts &f = job.runner_facts();
    if (!f.hostname().empty()) by["hostname"] = f.hostname();
    if (!f.target().empty()) by["target"] = f.target();
    if (!f.kiln_version().empty()) by["kiln_version"] = f.kiln_version();
    if (!f.device_name().empty()) by["device_name"] = f.device_name();
    result.measured_by = by.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return result;
}

std::string file_identity(const std::string &path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  auto time = fs::last_write_time(path, ec).time_since_epoch().count();
  return std::to_string(size) + ":" + std::to_string(time);
}

}  // namespace

TrackerUri parse_tracker_uri(const std::string &text) {
  const std::string scheme = "tracker://";
  std::string rest = text.rfind(scheme, 0) == 0 ? text.substr(scheme.size()) : "";
  size_t slash = rest.find('/');
  if (rest.empty() || slash == std::string::npos || slash == 0 || slash + 1 == rest.size() ||
      rest.find(':') == std::string::npos || rest.find(':') > slash) {
    throw std::invalid_argument("'" + text + "' is not a runner; expected local or tracker://HOST:PORT/KEY");
  }
  TrackerUri uri{rest.substr(0, slash), rest.substr(slash + 1)};
  parse_host_port(uri.address, "the tracker in '" + text + "'");
  if (std::string why = why_not_a_name(uri.key); !why.empty()) {
    throw std::invalid_argument("the key in '" + text + "' " + why + " (the key a runner serves, its --key)");
  }
  return uri;
}

RemoteRunner::RemoteRunner(RemoteRunnerOptions options) : options_(std::move(options)) {
  channel_ = make_channel(options_.tracker);
  stub_ = v1::Tracker::NewStub(channel_);
  session_id_ = "session-" + random_id();
}

template <class Call>
grpc::Status RemoteRunner::call_with_retry(const char *what, Call call) {
  auto start = std::chrono::steady_clock::now();
  double delay = 0.1;
  for (;;) {
    grpc::Status status = call();
    if (status.ok()) return status;
    grpc::StatusCode code = status.error_code();
    bool transient = code == grpc::UNAVAILABLE || code == grpc::DEADLINE_EXCEEDED || code == grpc::CANCELLED ||
                     code == grpc::ABORTED;
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!transient || waited > options_.give_up_after_seconds) {
      throw std::runtime_error(
          std::string("the tracker at ") + options_.tracker.address + " failed " + what + ": " + describe(status) +
          (transient ? "; it stayed unreachable for " + std::to_string(static_cast<int>(waited)) + " s" : ""));
    }
    if (options_.log && delay >= 1.6) {
      *options_.log << "remote runner: tracker " << options_.tracker.address << " unreachable (" << describe(status)
                    << "); retrying" << std::endl;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay = std::min(5.0, delay * 1.6);
  }
}

const RemoteRunner::Blob &RemoteRunner::blob_for(const std::string &path) {
  std::string identity = file_identity(path);
  auto it = blobs_.find(path);
  if (it != blobs_.end() && it->second.first == identity) return it->second.second;
  auto &[stored_identity, blob] = blobs_[path];
  stored_identity = identity;
  blob.bytes = read_file_bytes(path);
  blob.digest = digest_of(blob.bytes);
  return blob;
}

void RemoteRunner::upload_missing(const std::vector<const Blob *> &blobs) {
  v1::FindMissingBlobsRequest request;
  std::map<std::string, const Blob *> by_sha;
  for (const Blob *blob : blobs) {
    if (by_sha.emplace(blob->digest.sha256(), blob).second) *request.add_digests() = blob->digest;
  }
  v1::FindMissingBlobsResponse response;
  call_with_retry("to list missing blobs", [&] {
    auto context = make_context(options_.tracker, kCallTimeoutSeconds);
    return stub_->FindMissingBlobs(context.get(), request, &response);
  });
  for (const v1::Digest &digest : response.missing()) {
    const Blob *blob = by_sha.at(digest.sha256());
    call_with_retry("to store an artifact", [&] {
      return upload_blob(*stub_, options_.tracker, blob->digest, blob->bytes, kCallTimeoutSeconds);
    });
  }
}

std::string RemoteRunner::submit(const std::vector<v1::JobSpec> &jobs, std::map<std::string, v1::JobResult> &rejected) {
  v1::SubmitRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_1);
  request.set_session_id(session_id_);
  request.set_key(options_.key);
  request.set_queue_deadline_seconds(options_.queue_deadline_seconds);
  for (const v1::JobSpec &job : jobs) *request.add_jobs() = job;
  v1::SubmitResponse response;
  call_with_retry("to accept jobs", [&] {
    auto context = make_context(options_.tracker, kCallTimeoutSeconds);
    return stub_->Submit(context.get(), request, &response);
  });
  for (const v1::JobResult &r : response.rejected()) rejected[r.job_id()] = r;
  return response.tracker_instance_id();
}

std::vector<measure::RunResult> RemoteRunner::run(const std::vector<measure::RunInput> &batch) {
  std::vector<measure::RunResult> results(batch.size());
  if (batch.empty()) return results;
  // Candidates' artifacts are used by one batch; what repeats (the reference) is read
  // again at most once per batch after this.
  if (blobs_.size() > 256) blobs_.clear();
  std::vector<v1::JobSpec> jobs;
  std::vector<const Blob *> blobs;
  std::map<std::string, size_t> index_of_job;
  for (size_t i = 0; i < batch.size(); ++i) {
    const measure::RunInput &input = batch[i];
    v1::JobSpec job;
    job.set_job_id(std::to_string(next_job_++));
    const Blob &artifact = blob_for(input.artifact_path);
    *job.mutable_artifact() = artifact.digest;
    blobs.push_back(&artifact);
    if (!input.reference_artifact_path.empty()) {
      const Blob &reference = blob_for(input.reference_artifact_path);
      *job.mutable_reference() = reference.digest;
      blobs.push_back(&reference);
    }
    v1::TimingConfig *t = job.mutable_timing();
    t->set_number(input.timing.number);
    t->set_repeat(input.timing.repeat);
    t->set_min_repeat_ms(input.timing.min_repeat_ms);
    t->set_max_number(input.timing.max_number);
    t->set_flush_cache(input.timing.flush_cache);
    t->set_flush_args(input.timing.flush_args);
    t->set_give_up_after_seconds(input.timing.give_up_after_seconds);
    job.set_input_seed(input.input_seed);
    job.set_rtol(input.tolerance.rtol);
    job.set_atol(input.tolerance.atol);
    job.set_run_timeout_seconds(options_.run_timeout_seconds);
    job.set_target(options_.target);
    job.set_avoid_runner(input.avoid_runner);
    job.set_abi_version(options_.abi_version);
    job.set_label(fs::path(input.artifact_path).stem().string());
    index_of_job[job.job_id()] = i;
    jobs.push_back(std::move(job));
  }

  upload_missing(blobs);
  std::map<std::string, v1::JobResult> done;
  std::string instance = submit_all(jobs, blobs, done);
  try {
    wait_for_results(jobs, blobs, index_of_job, instance, done);
  } catch (...) {
    // The tuner stops here: the tracker need not run what is left.
    v1::CancelRequest cancel;
    cancel.set_session_id(session_id_);
    v1::CancelResponse ignored;
    auto context = make_context(options_.tracker, 5);
    stub_->Cancel(context.get(), cancel, &ignored);
    throw;
  }
  // Every job refused: the batch can never run there (the key's runners are another
  // target or ABI); stop with the tracker's reason rather than record the programs failed.
  if (!done.empty() && std::all_of(done.begin(), done.end(),
                                   [](const auto &entry) { return entry.second.code() == v1::ARTIFACT_REJECTED; }))
    throw std::runtime_error("the tracker refused every job of the batch: " + done.begin()->second.message());
  for (const auto &[job_id, result] : done) {
    if (result.code() == v1::NO_RUNNER) {
      throw std::runtime_error("no runner measured the batch: " + result.message());
    }
    results[index_of_job.at(job_id)] = run_result_of(result);
  }
  return results;
}

std::string RemoteRunner::submit_all(const std::vector<v1::JobSpec> &jobs, const std::vector<const Blob *> &blobs,
                                     std::map<std::string, v1::JobResult> &done) {
  std::map<std::string, v1::JobResult> rejected;
  std::string instance = submit(jobs, rejected);
  // A job is rejected when the tracker lacks its blobs: it restarted, or dropped them,
  // between our upload and the submission. Upload again and resubmit, a few times.
  for (int attempt = 0; attempt < 3 && !rejected.empty(); ++attempt) {
    std::vector<v1::JobSpec> again;
    for (const v1::JobSpec &job : jobs) {
      if (rejected.count(job.job_id())) again.push_back(job);
    }
    rejected.clear();
    upload_missing(blobs);
    instance = submit(again, rejected);
  }
  done.insert(rejected.begin(), rejected.end());
  return instance;
}

void RemoteRunner::report_waiting(size_t waiting, size_t total, double waited_seconds, bool first) {
  if (!options_.log) return;
  v1::GetTargetRequest request;
  request.set_key(options_.key);
  v1::GetTargetResponse response;
  auto context = make_context(options_.tracker, 5);
  // Unreachable or an older tracker: the polls say what went wrong, if anything did.
  if (!stub_->GetTarget(context.get(), request, &response).ok()) return;
  const std::string key = "key '" + options_.key + "'";
  const std::string jobs = std::to_string(waiting) + " of " + std::to_string(total) + " jobs";
  const std::string waited = std::to_string(static_cast<int64_t>(waited_seconds)) + " s";
  if (response.runners() == 0) {
    *options_.log << "remote runner: the tracker at " << options_.tracker.address << " has no runner of " << key
                  << (first ? "" : " yet") << "; " << jobs << " wait for one (" << waited
                  << " so far; the batch fails when none connects within the "
                  << static_cast<int64_t>(options_.queue_deadline_seconds)
                  << " s queue deadline). Start one on the device: kiln runner --tracker " << options_.tracker.address
                  << " --key " << options_.key << std::endl;
  } else if (!first) {
    *options_.log << "remote runner: waiting for " << jobs << " on " << key << " (" << response.runners() << " runner"
                  << (response.runners() == 1 ? "" : "s") << " of the key at the tracker; " << waited << " so far)"
                  << std::endl;
  }
}

void RemoteRunner::wait_for_results(const std::vector<v1::JobSpec> &jobs, const std::vector<const Blob *> &blobs,
                                    const std::map<std::string, size_t> &index_of_job, std::string &instance,
                                    std::map<std::string, v1::JobResult> &done) {
  const auto started = std::chrono::steady_clock::now();
  double next_report = 0;  // seconds after `started`
  bool first_report = true;
  while (done.size() < jobs.size()) {
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (waited >= next_report) {
      report_waiting(jobs.size() - done.size(), jobs.size(), waited, first_report);
      first_report = false;
      next_report = waited + std::max(0.1, options_.status_interval_seconds);
    }
    v1::PollResultsRequest request;
    request.set_session_id(session_id_);
    request.set_wait_seconds(std::min(kResultWaitSeconds, std::max(0.1, next_report - waited)));
    v1::PollResultsResponse response;
    call_with_retry("to report results", [&] {
      auto context = make_context(options_.tracker, kResultWaitSeconds + kCallTimeoutSeconds);
      return stub_->PollResults(context.get(), request, &response);
    });
    // A tracker that answers for no session, or for none of our jobs, forgot them: it
    // restarted, or dropped this session after a silence longer than its session timeout
    // (a suspended tuner). Polling on would spin forever; submit what is not done again,
    // under the same ids (blobs first: a restarted tracker's store is empty).
    const bool restarted = response.tracker_instance_id() != instance;
    const bool dropped = response.session_dropped() || (response.results_size() == 0 && response.pending_jobs() == 0);
    if (restarted || dropped) {
      std::vector<v1::JobSpec> again;
      for (const v1::JobSpec &job : jobs) {
        if (!done.count(job.job_id())) again.push_back(job);
      }
      if (options_.log) {
        *options_.log << "remote runner: "
                      << (restarted ? "the tracker restarted"
                                    : "the tracker dropped this tuner's session (no call from it for longer than the "
                                      "tracker's --session-timeout: was it suspended?)")
                      << "; submitting " << again.size() << " jobs again" << std::endl;
      }
      upload_missing(blobs);
      instance = submit_all(again, blobs, done);
      resubmitted_ += static_cast<int64_t>(again.size());
      continue;
    }
    v1::AckResultsRequest ack;
    ack.set_session_id(session_id_);
    for (const v1::JobResult &result : response.results()) {
      ack.add_job_ids(result.job_id());
      if (!index_of_job.count(result.job_id())) continue;  // an earlier batch's, acknowledged late
      done.emplace(result.job_id(), result);               // the first result of a job wins
    }
    if (ack.job_ids_size() > 0) {
      v1::AckResultsResponse ignored;
      call_with_retry("to forget delivered results", [&] {
        auto context = make_context(options_.tracker, kCallTimeoutSeconds);
        return stub_->AckResults(context.get(), ack, &ignored);
      });
    }
  }
}

void check_key_serves_target(const ClientOptions &tracker, const std::string &key, const std::string &target) {
  auto stub = v1::Tracker::NewStub(make_channel(tracker));
  v1::GetTargetRequest request;
  request.set_key(key);
  auto context = make_context(tracker, 30);
  v1::GetTargetResponse response;
  grpc::Status status = stub->GetTarget(context.get(), request, &response);
  if (!status.ok())
    throw std::runtime_error("cannot ask the tracker at " + tracker.address + " for the target of key '" + key +
                             "': " + describe(status));
  if (response.runners() == 0 || response.target().empty() || response.target() == target) return;
  throw std::runtime_error("the runners of key '" + key + "' at " + tracker.address + " measure '" + response.target() +
                           "', not '" + target +
                           "': omit --target to tune for the key's runners, or send the job to a key whose runners "
                           "are that device");
}

std::string remote_target(const ClientOptions &tracker, const std::string &key) {
  auto stub = v1::Tracker::NewStub(make_channel(tracker));
  v1::GetTargetRequest request;
  request.set_key(key);
  // A runner started a moment ago may not have polled yet: give it a few seconds.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto context = make_context(tracker, 30);
    v1::GetTargetResponse response;
    grpc::Status status = stub->GetTarget(context.get(), request, &response);
    if (!status.ok()) {
      throw std::runtime_error("cannot ask the tracker at " + tracker.address + " for the target of key '" + key +
                               "': " + describe(status));
    }
    if (response.runners() > 0 && !response.target().empty()) return response.target();
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("the tracker at " + tracker.address + " has no runner of key '" + key +
                               "' to take the target from; start one (kiln runner --key " + key + ") or pass --target");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace kiln::rpc
