#include "rpc/runner_daemon.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "codegen/runtime/abi.h"
#include "rpc/blob_transfer.h"
#include "rpc/connection.h"
#include "rpc/digest.h"

namespace kiln::rpc {

namespace fs = std::filesystem;

namespace {

constexpr double kCallTimeoutSeconds = 30;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string local_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "runner";
  return name;
}

std::string load_or_make_runner_id(const fs::path &cache_dir) {
  fs::path file = cache_dir / "runner-id";
  std::ifstream in(file);
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) {
    if (std::string why = why_not_a_name(id); !why.empty()) {
      throw std::runtime_error("the runner id kept in " + file.string() + " " + why +
                               "; delete the file (a new id is made) or pass --runner-id");
    }
    return id;
  }
  // Host names may hold characters ids may not (and be longer than they may be).
  std::string host = local_hostname().substr(0, 64);
  for (char &c : host) {
    if (!is_name_char(c)) c = '-';
  }
  std::random_device random;
  id = host + "-" + std::to_string(random() % 1000000);
  std::ofstream out(file);
  out << id << "\n";
  out.close();
  if (!out) throw std::runtime_error("cannot write the runner id to " + file.string() + ": " + std::strerror(errno));
  return id;
}

v1::ResultCode code_of(measure::ErrorKind kind) {
  switch (kind) {
    case measure::ErrorKind::kNone:
      return v1::OK;
    case measure::ErrorKind::kLoadError:
      return v1::LOAD_ERROR;
    case measure::ErrorKind::kRunTimeout:
      return v1::RUN_TIMEOUT;
    case measure::ErrorKind::kWrongResult:
      return v1::WRONG_RESULT;
    default:
      return v1::RUNTIME_ERROR;
  }
}

// Sleeps up to `seconds`, waking early when `stop` is set.
void interruptible_sleep(double seconds, const std::atomic<bool> &stop) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!stop && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Cancels the call of `context` as soon as `stop` is set, for as long as it lives: an
// idle runner's long poll would otherwise hold SIGTERM for the whole wait.
class CancelOnStop {
 public:
  CancelOnStop(grpc::ClientContext &context, const std::atomic<bool> &stop)
      : watcher_([this, &context, &stop] {
          std::unique_lock<std::mutex> lock(mutex_);
          while (!finished_ && !stop) changed_.wait_for(lock, std::chrono::milliseconds(50));
          if (!finished_) context.TryCancel();
        }) {}
  CancelOnStop(const CancelOnStop &) = delete;
  CancelOnStop &operator=(const CancelOnStop &) = delete;
  ~CancelOnStop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    changed_.notify_all();
    watcher_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool finished_ = false;
  std::thread watcher_;  // last: started once the members it reads exist
};

}  // namespace

v1::DeviceFacts host_device_facts(const std::string &target) {
  v1::DeviceFacts facts;
  facts.set_target(target);
  facts.set_cores(static_cast<int32_t>(std::thread::hardware_concurrency()));
  struct sysinfo info {};
  if (sysinfo(&info) == 0) facts.set_memory_bytes(static_cast<int64_t>(info.totalram) * info.mem_unit);
  facts.set_abi_version(KILN_ABI_VERSION);
  facts.set_kiln_version(KILN_VERSION_STRING);
  facts.set_hostname(local_hostname());
  return facts;
}

RunnerDaemon::RunnerDaemon(RunnerDaemonOptions options, measure::Runner &measurer, double run_timeout_seconds,
                           std::ostream &log)
    : options_(std::move(options)), measurer_(measurer), log_(log) {
  if (std::string why = why_not_a_name(options_.key); !why.empty())
    throw std::invalid_argument("--key '" + options_.key + "' " + why);
  // An empty runner id means "the one kept in the cache directory".
  if (std::string why = why_not_a_name(options_.runner_id); !options_.runner_id.empty() && !why.empty())
    throw std::invalid_argument("--runner-id '" + options_.runner_id + "' " + why);
  std::error_code error;
  fs::create_directories(options_.cache_dir / "blobs", error);
  if (error) {
    throw std::runtime_error("cannot use " + options_.cache_dir.string() + " as the runner's cache directory: " +
                             error.message() + "; give a writable folder with --cache-dir");
  }
  runner_id_ = options_.runner_id.empty() ? load_or_make_runner_id(options_.cache_dir) : options_.runner_id;
  process_id_ = std::to_string(getpid()) + "-" + random_id();
  channel_ = make_channel(options_.tracker);
  stub_ = v1::Tracker::NewStub(channel_);
  facts_ = host_device_facts(options_.target);
  facts_.set_run_timeout_seconds(run_timeout_seconds);
  facts_.set_device_name(options_.device_name);
}

v1::RunnerPollRequest RunnerDaemon::poll_request(double wait_seconds, uint64_t held_lease) const {
  v1::RunnerPollRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_1);
  request.set_runner_id(runner_id_);
  request.set_process_id(process_id_);
  request.set_key(options_.key);
  *request.mutable_facts() = facts_;
  if (held_lease != 0) request.add_held_leases(held_lease);
  request.set_wait_seconds(wait_seconds);
  return request;
}

void RunnerDaemon::backoff(double &delay, const std::atomic<bool> &stop, const std::string &waiting_for) {
  static thread_local std::mt19937 random(std::random_device{}());
  double jittered =
      std::min(options_.max_backoff_seconds, delay * std::uniform_real_distribution<double>(0.8, 1.2)(random));
  char interval[32];
  std::snprintf(interval, sizeof interval, "%.1f", jittered);
  log_ << "kiln runner: " << waiting_for << "; next try in " << interval << " s" << std::endl;
  interruptible_sleep(jittered, stop);
  delay = std::min(options_.max_backoff_seconds, delay * 1.6);
}

int64_t RunnerDaemon::run(const std::atomic<bool> &stop) {
  int64_t jobs = 0;
  double delay = options_.min_backoff_seconds;
  bool connected = false;
  log_ << "kiln runner " << runner_id_ << ": key '" << options_.key << "', target '" << options_.target << "', tracker "
       << options_.tracker.address << std::endl;
  while (!stop && (options_.max_jobs == 0 || jobs < options_.max_jobs)) {
    v1::RunnerPollRequest request = poll_request(options_.poll_wait_seconds, 0);
    v1::RunnerPollResponse response;
    auto context = make_context(options_.tracker, options_.poll_wait_seconds + kCallTimeoutSeconds);
    grpc::Status status;
    {
      CancelOnStop cancel_on_stop(*context, stop);
      status = stub_->RunnerPoll(context.get(), request, &response);
    }
    if (stop && !status.ok()) break;  // cancelled by the stop, or failing as it came
    if (!status.ok()) {
      if (status.error_code() == grpc::UNAUTHENTICATED || status.error_code() == grpc::PERMISSION_DENIED ||
          status.error_code() == grpc::FAILED_PRECONDITION) {
        // Retrying cannot fix a refused token, another role's token or another protocol version.
        throw std::runtime_error("the tracker at " + options_.tracker.address +
                                 " refused this runner: " + describe(status));
      }
      backoff(delay, stop,
              std::string(connected ? "lost the tracker at " : "waiting for the tracker at ") +
                  options_.tracker.address + " (" + describe(status) + ")");
      connected = false;
      continue;
    }
    if (!connected) log_ << "kiln runner: connected to tracker " << response.tracker_instance_id() << std::endl;
    connected = true;
    delay = options_.min_backoff_seconds;
    for (const v1::Assignment &assignment : response.assignments()) {
      v1::JobResult result;
      if (stop) {
        // Stopping: give the job back at once rather than let its lease time out.
        result.set_job_id(assignment.job().job_id());
        result.set_lease_id(assignment.lease_id());
        result.set_code(v1::RETRY);
        result.set_message("the runner is stopping");
      } else {
        result = measure_job(assignment);
        ++jobs;
      }
      report(result, stop);
    }
  }
  return jobs;
}

v1::JobResult RunnerDaemon::measure_job(const v1::Assignment &assignment) {
  const v1::JobSpec &job = assignment.job();
  v1::JobResult result;
  result.set_job_id(job.job_id());
  result.set_lease_id(assignment.lease_id());
  result.set_runner_id(runner_id_);

  // Heartbeats while the job runs, so the tracker keeps the lease; a revoked lease
  // (cancelled, or resolved elsewhere after a reconnect) is still finished: a running
  // child is not interrupted, its result is simply discarded by the tracker.
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = false;
  std::thread heartbeat([&] {
    std::unique_lock<std::mutex> lock(mutex);
    // The first beat at once: it confirms to the tracker that the assignment arrived.
    double interval = 0;
    while (!done_changed.wait_for(lock, std::chrono::duration<double>(interval), [&] { return done; })) {
      lock.unlock();
      v1::RunnerPollResponse response;
      auto context = make_context(options_.tracker, kCallTimeoutSeconds);
      grpc::Status status = stub_->RunnerPoll(context.get(), poll_request(0, assignment.lease_id()), &response);
      if (status.ok() && response.heartbeat_seconds() > 0) interval = std::max(0.2, response.heartbeat_seconds() / 2);
      lock.lock();
    }
  });

  // Joined on every path out, exceptions included.
  struct StopHeartbeat {
    std::mutex &mutex;
    std::condition_variable &changed;
    bool &done;
    std::thread &thread;
    ~StopHeartbeat() {
      {
        std::lock_guard<std::mutex> lock(mutex);
        done = true;
      }
      changed.notify_all();
      thread.join();
    }
  } stop_heartbeat{mutex, done_changed, done, heartbeat};

  double fetch_seconds = 0;
  std::string error;
  bool retryable = false;
  fs::path artifact = cached_blob(job.artifact(), error, retryable, fetch_seconds);
  fs::path reference;
  if (error.empty() && !job.reference().sha256().empty()) {
    reference = cached_blob(job.reference(), error, retryable, fetch_seconds);
  }
  result.set_fetch_seconds(fetch_seconds);
  if (!error.empty()) {
    result.set_code(retryable ? v1::RETRY : v1::ARTIFACT_REJECTED);
    result.set_message(error);
  } else
    try {
      measure::RunInput input;
      input.artifact_path = artifact.string();
      input.reference_artifact_path = reference.string();
      input.input_seed = job.input_seed();
      input.tolerance.rtol = job.rtol();
      input.tolerance.atol = job.atol();
      const v1::TimingConfig &t = job.timing();
      input.timing.number = t.number();
      input.timing.repeat = t.repeat();
      input.timing.min_repeat_ms = t.min_repeat_ms();
      input.timing.max_number = t.max_number();
      input.timing.flush_cache = t.flush_cache();
      input.timing.flush_args = t.flush_args();
      input.timing.give_up_after_seconds = t.give_up_after_seconds();
      measure::RunResult run = measurer_.run({input})[0];
      result.set_code(code_of(run.error));
      result.set_message(run.message);
      for (double s : run.repeat_seconds) result.add_repeat_seconds(s);
      result.set_number(run.number);
      result.set_calibration_calls(run.calibration_calls);
      result.set_run_seconds(run.run_seconds);
    } catch (const std::exception &e) {
      // The runner's own trouble (cannot fork, lock file unusable), not the kernel's.
      result.set_code(v1::RETRY);
      result.set_message(std::string("runner ") + runner_id_ + " could not run the job: " + e.what());
      log_ << "kiln runner: " << result.message() << std::endl;
    }
  return result;
}

fs::path RunnerDaemon::cached_blob(const v1::Digest &digest, std::string &error, bool &retryable,
                                   double &fetch_seconds) {
  const std::string &sha = digest.sha256();
  if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos) {
    error = "the job names a malformed digest '" + sha + "'";
    return {};
  }
  fs::path path = options_.cache_dir / "blobs" / (sha + ".so");
  std::error_code ec;
  if (fs::exists(path, ec) && static_cast<int64_t>(fs::file_size(path, ec)) == digest.size_bytes()) {
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // most recently used
    return path;
  }
  trim_cache();
  // Fetched under a temporary name and renamed: a file at `path` is always whole, and
  // its bytes were checked against the digest as they arrived.
  fs::path temporary = path;
  temporary += ".part-" + std::to_string(getpid());
  auto start = std::chrono::steady_clock::now();
  grpc::Status status = fetch_blob(*stub_, options_.tracker, digest, options_.max_blob_bytes, 120, temporary);
  fetch_seconds += seconds_since(start);
  if (!status.ok()) {
    error = "cannot fetch blob " + sha + ": " + describe(status);
    // A blob too large or not matching its digest is refused for good; anything else
    // (the tracker away or restarted, a full disk here) may work on another try.
    retryable = status.error_code() != grpc::RESOURCE_EXHAUSTED && status.error_code() != grpc::DATA_LOSS;
    return {};
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    error = "cannot store " + path.string() + ": " + ec.message();
    retryable = true;
    return {};
  }
  return path;
}

void RunnerDaemon::trim_cache() {
  std::vector<std::pair<fs::file_time_type, fs::path>> files;
  int64_t total = 0;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(options_.cache_dir / "blobs", ec)) {
    if (!entry.is_regular_file(ec)) continue;
    total += static_cast<int64_t>(entry.file_size(ec));
    files.emplace_back(entry.last_write_time(ec), entry.path());
  }
  if (total <= options_.max_cache_bytes) return;
  std::sort(files.begin(), files.end());
  for (const auto &[time, path] : files) {
    if (total <= options_.max_cache_bytes) break;
    total -= static_cast<int64_t>(fs::file_size(path, ec));
    fs::remove(path, ec);
  }
}

void RunnerDaemon::report(const v1::JobResult &result, const std::atomic<bool> &stop) {
  v1::ReportResultRequest request;
  request.set_runner_id(runner_id_);
  *request.mutable_result() = result;
  double delay = options_.min_backoff_seconds;
  // Until acknowledged: a result is the expensive part, a brief tracker outage must not
  // lose it. A restarted tracker answers "not accepted", which also ends the retries.
  // When stopping, a few quick tries still hand the finished result over.
  int tries_after_stop = 0;
  for (int attempt = 0;; ++attempt) {
    v1::ReportResultResponse response;
    auto context = make_context(options_.tracker, stop ? 2 : kCallTimeoutSeconds);
    grpc::Status status = stub_->ReportResult(context.get(), request, &response);
    if (status.ok()) {
      if (!response.accepted()) {
        log_ << "kiln runner: the tracker did not take the result of job " << result.job_id()
             << (attempt == 0
                     ? " (the job was given to another runner or cancelled)"
                     : " (the tracker no longer holds the job: it restarted, gave the job to another runner or "
                       "cancelled it while this runner retried, or took this result on a try whose answer was "
                       "lost)")
             << std::endl;
      }
      return;
    }
    if (stop) {
      if (++tries_after_stop > 3) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else {
      backoff(delay, stop,
              "cannot hand the result of job " + result.job_id() + " to the tracker at " + options_.tracker.address +
                  " (" + describe(status) + ")");
    }
  }
}

}  // namespace kiln::rpc
