// The tracker at fleet scale. Part 1 drives the dispatcher library with a fake clock:
// the cost of one expiry pass and of one dispatch with many runners and a long queue.
// Part 2 starts a real `kiln tracker` process and, over loopback, N simulated runners
// (callback-API clients in this process, no thread each) and one tuner that submits M
// trivial jobs and collects their results: the latency of a runner's poll answered with
// a job (p50/p99), the wake-up latency of runners waiting when jobs arrive, jobs/s, and
// the tracker process's CPU time and peak memory. Part 3 uploads one large artifact to
// a tracker that keeps large blobs in files and to one that keeps them in memory, has
// runners fetch it, and compares the two trackers' peak memory.
//
// Usage: kiln_bench_tracker_scale [runners=1000] [jobs=100000] [job_ms=500] [blob_mb=48]
// (job_ms: how long a simulated runner measures a job on average, spread ±50%; 0: it
// reports at once, which shows the tracker's saturation throughput, not its latency.)
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rpc/blob_transfer.h"
#include "rpc/connection.h"
#include "rpc/digest.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"
#include "tests/tracker/processes.h"
#include "tracker/dispatcher.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = kiln::rpc::v1;
using kiln::tracker::testing::Process;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t at = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
  return values[at];
}

/// A process's CPU seconds (user + system) and resident memory from /proc.
struct ProcessUsage {
  double cpu_seconds = 0;
  double rss_mb = 0;
  double peak_rss_mb = 0;
};

ProcessUsage usage_of(pid_t pid) {
  ProcessUsage usage;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  std::vector<std::string> values;
  while (fields >> field) values.push_back(field);
  // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
  if (values.size() > 12) {
    usage.cpu_seconds = (std::stod(values[11]) + std::stod(values[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) usage.rss_mb = std::stod(line.substr(6)) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) usage.peak_rss_mb = std::stod(line.substr(6)) / 1024;
  }
  return usage;
}

v1::Digest fake_digest() {
  v1::Digest digest;
  digest.set_sha256(std::string(64, 'a'));
  digest.set_size_bytes(4096);
  return digest;
}

// ---------------------------------------------------------------------------------------
// Part 1: the dispatcher library.

void library_costs(int runners, int jobs) {
  double now = 0;
  kiln::tracker::DispatcherOptions options;
  options.max_jobs_per_submit = jobs;
  kiln::tracker::Dispatcher dispatcher(
      options, [&] { return now; }, "bench");
  auto poll_request = [](int runner) {
    v1::RunnerPollRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_1);
    request.set_runner_id("runner-" + std::to_string(runner));
    request.set_key("cpu");
    request.mutable_facts()->set_target("llvm -mcpu=znver3");
    return request;
  };
  // Half the runners busy with a job, the rest idle, and the queue full behind them.
  v1::SubmitRequest submit;
  submit.set_protocol_version(v1::PROTOCOL_VERSION_1);
  submit.set_session_id("tuner");
  submit.set_key("cpu");
  for (int i = 0; i < jobs; ++i) {
    v1::JobSpec *job = submit.add_jobs();
    job->set_job_id(std::to_string(i));
    *job->mutable_artifact() = fake_digest();
    job->set_run_timeout_seconds(10);
  }
  auto start = Clock::now();
  dispatcher.submit(submit, [](const v1::Digest &) { return true; });
  double submit_seconds = seconds_since(start);
  std::string refusal;
  std::vector<v1::Assignment> held(static_cast<size_t>(runners));
  for (int r = 0; r < runners / 2; ++r) {
    held[r] = dispatcher.poll_runner(poll_request(r), nullptr, refusal).assignments(0);
  }
  for (int r = runners / 2; r < runners; ++r) {
    auto request = poll_request(r);
    request.add_held_leases(12345678);  // an unknown lease: registered, revoked, given nothing
    dispatcher.poll_runner(request, nullptr, refusal);
  }
  constexpr int kPasses = 2000;
  start = Clock::now();
  for (int i = 0; i < kPasses; ++i) {
    now += 1e-4;
    dispatcher.expire();
  }
  double expire_us = seconds_since(start) / kPasses * 1e6;
  // One dispatch cycle: a busy runner reports, polls and gets the next job.
  std::vector<double> cycle_us;
  for (int i = 0; i < 20000; ++i) {
    int r = i % (runners / 2);
    auto cycle_start = Clock::now();
    v1::JobResult result;
    result.set_job_id(held[r].job().job_id());
    result.set_lease_id(held[r].lease_id());
    result.set_code(v1::OK);
    result.add_repeat_seconds(1e-3);
    dispatcher.report_result("runner-" + std::to_string(r), result);
    auto response = dispatcher.poll_runner(poll_request(r), nullptr, refusal);
    cycle_us.push_back(seconds_since(cycle_start) * 1e6);
    if (response.assignments_size() == 0) break;
    held[r] = response.assignments(0);
    if (i % 1000 == 999) {
      // The tuner collects what is done, as it does all along.
      auto results = dispatcher.poll_results("tuner", 0);
      std::vector<std::string> ids;
      for (const auto &done : results.results()) ids.push_back(done.job_id());
      dispatcher.ack_results("tuner", ids);
    }
  }
  std::printf("## Dispatcher library (fake clock): %d runners, %d queued jobs\n\n", runners, jobs);
  std::printf("| operation | cost |\n|---|---:|\n");
  std::printf("| submit %d jobs (one call) | %.1f ms |\n", jobs, submit_seconds * 1e3);
  std::printf("| one expiry pass (nothing due) | %.2f us |\n", expire_us);
  std::printf("| report + poll + assign, p50 | %.2f us |\n", percentile(cycle_us, 0.5));
  std::printf("| report + poll + assign, p99 | %.2f us |\n\n", percentile(cycle_us, 0.99));
}

// ---------------------------------------------------------------------------------------
// Part 2: a real tracker process and simulated runners over loopback.

/// Fires callbacks at their times from one thread: the simulated runners' measurements.
class Timer {
 public:
  Timer() : thread_([this] { run(); }) {}
  ~Timer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  void at(Clock::time_point when, std::function<void()> callback) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      due_.emplace(when, std::move(callback));
    }
    changed_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      if (due_.empty()) {
        changed_.wait(lock);
      } else if (due_.begin()->first <= Clock::now()) {
        auto callback = std::move(due_.begin()->second);
        due_.erase(due_.begin());
        lock.unlock();
        callback();
        lock.lock();
      } else {
        changed_.wait_until(lock, due_.begin()->first);
      }
    }
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::multimap<Clock::time_point, std::function<void()>> due_;
  bool stopping_ = false;
  std::thread thread_;
};

struct Fleet {
  std::chrono::microseconds job_duration{0};
  Timer timer;
  std::vector<std::unique_ptr<v1::Tracker::Stub>> stubs;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> jobs_done{0};
  std::atomic<int> live_calls{0};
  std::mutex mutex;
  std::vector<double> busy_poll_ms;  // polls answered with a job while the queue was full
  std::vector<double> report_ms;
  std::vector<double> wake_ms;  // first job of a waiting runner, from the submission
  Clock::time_point first_submit_sent;
  std::atomic<bool> submitted{false};
  std::atomic<bool> all_queued{false};
};

/// One simulated runner: poll (waiting up to 20 s) -> report OK at once -> poll again.
class FakeRunner {
 public:
  FakeRunner(Fleet &fleet, v1::Tracker::Stub &stub, std::string id)
      : fleet_(fleet), stub_(stub), id_(std::move(id)), random_(std::hash<std::string>()(id_)) {
    request_.set_protocol_version(v1::PROTOCOL_VERSION_1);
    request_.set_runner_id(id_);
    request_.set_process_id(id_ + "-process");
    request_.set_key("bench");
    request_.mutable_facts()->set_target("llvm -mcpu=znver3");
    request_.mutable_facts()->set_hostname(id_);
  }

  void poll() {
    if (fleet_.stopping) return;
    context_ = std::make_unique<grpc::ClientContext>();
    context_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(40));
    request_.set_wait_seconds(first_poll_ ? 0 : 20);
    response_.Clear();
    queue_was_full_ = fleet_.all_queued.load();
    sent_ = Clock::now();
    ++fleet_.live_calls;
    stub_.async()->RunnerPoll(context_.get(), &request_, &response_, [this](grpc::Status status) { polled(status); });
  }

 private:
  void polled(const grpc::Status &status) {
    double ms = seconds_since(sent_) * 1e3;
    bool was_first = first_poll_;
    first_poll_ = false;
    if (!status.ok() || response_.assignments_size() == 0) {
      if (!status.ok() && !fleet_.stopping)
        std::fprintf(stderr, "poll of %s: %s\n", id_.c_str(), status.error_message().c_str());
      --fleet_.live_calls;
      if (!was_first && !status.ok() && !fleet_.stopping) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      poll();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(fleet_.mutex);
      if (!got_first_job_ && fleet_.submitted) {
        fleet_.wake_ms.push_back(std::chrono::duration<double>(Clock::now() - fleet_.first_submit_sent).count() * 1e3);
      } else if (queue_was_full_) {
        fleet_.busy_poll_ms.push_back(ms);
      }
    }
    got_first_job_ = true;
    const v1::Assignment &assignment = response_.assignments(0);
    report_.Clear();
    report_.set_runner_id(id_);
    v1::JobResult *result = report_.mutable_result();
    result->set_job_id(assignment.job().job_id());
    result->set_lease_id(assignment.lease_id());
    result->set_code(v1::OK);
    result->add_repeat_seconds(1e-3);
    if (fleet_.job_duration.count() == 0) {
      report();
    } else {
      // Measurements take longer or shorter (±50%): runners do not finish in lockstep.
      std::uniform_real_distribution<double> spread(0.5, 1.5);
      auto duration = std::chrono::duration_cast<Clock::duration>(fleet_.job_duration * spread(random_));
      fleet_.timer.at(Clock::now() + duration, [this] { report(); });
    }
  }

  void report() {
    report_context_ = std::make_unique<grpc::ClientContext>();
    report_context_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    report_sent_ = Clock::now();
    stub_.async()->ReportResult(report_context_.get(), &report_, &report_response_,
                                [this](grpc::Status status) { reported(status); });
  }

  void reported(const grpc::Status &status) {
    if (status.ok()) {
      ++fleet_.jobs_done;
      std::lock_guard<std::mutex> lock(fleet_.mutex);
      fleet_.report_ms.push_back(seconds_since(report_sent_) * 1e3);
    }
    --fleet_.live_calls;
    poll();
  }

  Fleet &fleet_;
  v1::Tracker::Stub &stub_;
  std::string id_;
  bool first_poll_ = true;
  bool got_first_job_ = false;
  bool queue_was_full_ = false;
  std::unique_ptr<grpc::ClientContext> context_, report_context_;
  v1::RunnerPollRequest request_;
  v1::RunnerPollResponse response_;
  v1::ReportResultRequest report_;
  v1::ReportResultResponse report_response_;
  Clock::time_point sent_, report_sent_;
  std::mt19937 random_;
};

std::shared_ptr<grpc::Channel> channel_to(const std::string &address, int index) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("kiln.bench.channel", index);  // a connection of its own
  args.SetMaxReceiveMessageSize(kiln::rpc::kMaxMessageBytes);
  args.SetMaxSendMessageSize(kiln::rpc::kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void upload(v1::Tracker::Stub &stub, const std::string &bytes) {
  kiln::rpc::ClientOptions options;
  grpc::Status status = kiln::rpc::upload_blob(stub, options, kiln::rpc::digest_of(bytes), bytes, 300);
  if (!status.ok()) throw std::runtime_error("upload: " + status.error_message());
}

struct Tracker {
  Tracker(const fs::path &dir, const std::string &name, std::vector<std::string> extra) {
    fs::path port = dir / (name + ".port");
    std::vector<std::string> args = {
        kiln::tracker::testing::kiln_binary(), "tracker", "--listen", "127.0.0.1:0", "--port-file", port.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    process = std::make_unique<Process>(args, dir / (name + ".log"));
    address = "127.0.0.1:" + std::to_string(kiln::tracker::testing::wait_for_port(port));
  }
  std::unique_ptr<Process> process;
  std::string address;
};

void fleet_run(const fs::path &dir, int runners, int jobs, double job_ms) {
  Tracker tracker(dir, "fleet", {"--queue-deadline", "3600"});
  Fleet fleet;
  fleet.job_duration = std::chrono::microseconds(static_cast<int64_t>(job_ms * 1e3));
  constexpr int kChannels = 16;
  for (int i = 0; i < kChannels; ++i) fleet.stubs.push_back(v1::Tracker::NewStub(channel_to(tracker.address, i)));
  std::vector<std::unique_ptr<FakeRunner>> fleet_runners;
  for (int r = 0; r < runners; ++r) {
    fleet_runners.push_back(
        std::make_unique<FakeRunner>(fleet, *fleet.stubs[r % kChannels], "runner-" + std::to_string(r)));
  }
  for (auto &runner : fleet_runners) runner->poll();
  // Registered (first poll, no wait) and then waiting in a long poll.
  auto registered_by = Clock::now() + std::chrono::seconds(60);
  v1::StatusResponse status;
  while (Clock::now() < registered_by) {
    grpc::ClientContext context;
    fleet.stubs[0]->Status(&context, v1::StatusRequest(), &status);
    if (status.runners_size() >= runners) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ProcessUsage before = usage_of(tracker.process->pid());
  std::printf("## Tracker process over loopback: %d simulated runners, %d jobs of %g ms each\n\n", runners, jobs,
              job_ms);
  std::printf("%d runners registered, waiting in long polls; tracker: %.1f MB resident, %.2f CPU s so far\n\n",
              status.runners_size(), before.rss_mb, before.cpu_seconds);

  // The tuner: submits every job in batches of 4096, then collects the results.
  v1::Tracker::Stub &tuner = *fleet.stubs[0];
  std::string artifact(4096, 'k');
  upload(tuner, artifact);
  v1::Digest digest = kiln::rpc::digest_of(artifact);
  std::vector<double> submit_ms;
  auto start = Clock::now();
  for (int first = 0; first < jobs; first += 4096) {
    v1::SubmitRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_1);
    request.set_session_id("bench-tuner");
    request.set_key("bench");
    for (int i = first; i < std::min(jobs, first + 4096); ++i) {
      v1::JobSpec *job = request.add_jobs();
      job->set_job_id(std::to_string(i));
      *job->mutable_artifact() = digest;
      job->set_run_timeout_seconds(10);
    }
    grpc::ClientContext context;
    v1::SubmitResponse response;
    auto sent = Clock::now();
    if (first == 0) {
      fleet.first_submit_sent = sent;
      fleet.submitted = true;
    }
    grpc::Status s = tuner.Submit(&context, request, &response);
    submit_ms.push_back(seconds_since(sent) * 1e3);
    if (!s.ok() || response.accepted_job_ids_size() != request.jobs_size()) {
      throw std::runtime_error("submit: " + s.error_message());
    }
  }
  fleet.all_queued = true;
  double submitted_after = seconds_since(start);
  int64_t collected = 0;
  while (collected < jobs && seconds_since(start) < 900) {
    grpc::ClientContext context;
    v1::PollResultsRequest request;
    request.set_session_id("bench-tuner");
    request.set_wait_seconds(5);
    v1::PollResultsResponse response;
    if (!tuner.PollResults(&context, request, &response).ok()) continue;
    v1::AckResultsRequest ack;
    ack.set_session_id("bench-tuner");
    for (const auto &result : response.results()) ack.add_job_ids(result.job_id());
    collected += response.results_size();
    grpc::ClientContext ack_context;
    v1::AckResultsResponse ack_response;
    tuner.AckResults(&ack_context, ack, &ack_response);
  }
  double elapsed = seconds_since(start);
  ProcessUsage after = usage_of(tracker.process->pid());
  fleet.stopping = true;

  std::printf("| measure | value |\n|---|---:|\n");
  std::printf("| results collected | %lld of %d in %.1f s (%.0f jobs/s end to end) |\n", (long long)collected, jobs,
              elapsed, static_cast<double>(collected) / elapsed);
  std::printf("| all jobs queued after | %.2f s (Submit of 4096 jobs: p50 %.1f ms, max %.1f ms) |\n", submitted_after,
              percentile(submit_ms, 0.5), percentile(submit_ms, 1.0));
  std::lock_guard<std::mutex> lock(fleet.mutex);
  std::printf(
      "| dispatch: poll answered with a job (queue full), p50 / p99 / max | %.2f / %.2f / %.2f ms (%zu polls) |\n",
      percentile(fleet.busy_poll_ms, 0.5), percentile(fleet.busy_poll_ms, 0.99), percentile(fleet.busy_poll_ms, 1.0),
      fleet.busy_poll_ms.size());
  std::printf(
      "| wake-up: waiting runner's first job after the first Submit, p50 / p99 | %.1f / %.1f ms (%zu runners) |\n",
      percentile(fleet.wake_ms, 0.5), percentile(fleet.wake_ms, 0.99), fleet.wake_ms.size());
  std::printf("| ReportResult, p50 / p99 | %.2f / %.2f ms |\n", percentile(fleet.report_ms, 0.5),
              percentile(fleet.report_ms, 0.99));
  std::printf("| tracker CPU during the run | %.1f s (%.0f%% of one core) |\n", after.cpu_seconds - before.cpu_seconds,
              100 * (after.cpu_seconds - before.cpu_seconds) / elapsed);
  std::printf("| tracker memory: resident at the end / peak | %.1f / %.1f MB |\n\n", after.rss_mb, after.peak_rss_mb);
  std::fflush(stdout);
  // The tracker's shutdown answers the waiting polls; the runners stop issuing calls.
  tracker.process->signal(SIGTERM);
  tracker.process->wait_for(10);
  auto until = Clock::now() + std::chrono::seconds(60);
  while (fleet.live_calls > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (fleet.live_calls > 0) {
    std::fprintf(stderr, "%d runner calls still open after the tracker stopped\n", fleet.live_calls.load());
    std::_Exit(1);  // their callbacks would run on freed runners
  }
}

// ---------------------------------------------------------------------------------------
// Part 3: large blobs.

ProcessUsage blob_run(const fs::path &dir, const std::string &name, std::vector<std::string> flags,
                      const std::string &blob, int fetchers) {
  Tracker tracker(dir, name, flags);
  auto stub = v1::Tracker::NewStub(channel_to(tracker.address, 0));
  upload(*stub, blob);
  std::vector<std::thread> threads;
  std::atomic<int> complete{0};
  for (int f = 0; f < fetchers; ++f) {
    threads.emplace_back([&, f] {
      auto own = v1::Tracker::NewStub(channel_to(tracker.address, 1 + f));
      grpc::ClientContext context;
      v1::FetchBlobRequest request;
      *request.mutable_digest() = kiln::rpc::digest_of(blob);
      auto reader = own->FetchBlob(&context, request);
      v1::BlobChunk chunk;
      size_t bytes = 0;
      while (reader->Read(&chunk)) bytes += chunk.data().size();
      if (reader->Finish().ok() && bytes == blob.size()) ++complete;
    });
  }
  for (auto &thread : threads) thread.join();
  ProcessUsage usage = usage_of(tracker.process->pid());
  if (complete != fetchers)
    std::fprintf(stderr, "%s: %d of %d fetches complete\n", name.c_str(), complete.load(), fetchers);
  tracker.process->signal(SIGTERM);
  tracker.process->wait_for(10);
  return usage;
}

std::string random_blob(int mb, unsigned seed) {
  std::string blob(static_cast<size_t>(mb) << 20, '\0');
  std::mt19937_64 random(seed);
  for (size_t i = 0; i + 8 <= blob.size(); i += 8) {
    uint64_t value = random();
    std::memcpy(&blob[i], &value, 8);
  }
  return blob;
}

void blob_memory(const fs::path &dir, int blob_mb) {
  constexpr int kFetchers = 4;
  ProcessUsage empty = blob_run(dir, "empty", {}, std::string(100, 'x'), 1);
  std::printf("## Large artifacts: one blob uploaded, then fetched by %d runners at once\n\n", kFetchers);
  std::printf("| tracker | peak resident memory | above the baseline |\n|---|---:|---:|\n");
  std::printf("| a 100-byte blob (baseline) | %.1f MB | |\n", empty.peak_rss_mb);
  for (int mb : {std::max(1, blob_mb / 4), blob_mb, blob_mb * 4}) {
    std::string blob = random_blob(mb, static_cast<unsigned>(mb));
    std::string cap = std::to_string(mb + 1);
    ProcessUsage files = blob_run(dir, "files-" + std::to_string(mb),
                                  {"--blob-dir", (dir / "blobs").string(), "--max-blob-mb", cap}, blob, kFetchers);
    std::printf("| %d MB blob, kept in a file (the default above 256 KB) | %.1f MB | %.1f MB |\n", mb,
                files.peak_rss_mb, files.peak_rss_mb - empty.peak_rss_mb);
    if (mb == blob_mb) {
      ProcessUsage memory =
          blob_run(dir, "memory-" + std::to_string(mb),
                   {"--blob-memory-kb", std::to_string(mb << 10), "--max-blob-mb", cap}, blob, kFetchers);
      std::printf("| %d MB blob, kept in memory (--blob-memory-kb %d) | %.1f MB | %.1f MB |\n", mb, mb << 10,
                  memory.peak_rss_mb, memory.peak_rss_mb - empty.peak_rss_mb);
    }
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char **argv) {
  int runners = argc > 1 ? std::atoi(argv[1]) : 1000;
  int jobs = argc > 2 ? std::atoi(argv[2]) : 100000;
  double job_ms = argc > 3 ? std::atof(argv[3]) : 500;
  int blob_mb = argc > 4 ? std::atoi(argv[4]) : 48;
  if (runners < 2 || jobs < 1 || job_ms < 0 || blob_mb < 1) {
    std::fprintf(stderr, "usage: kiln_bench_tracker_scale [runners>=2] [jobs>=1] [job_ms>=0] [blob_mb>=1]\n");
    return 2;
  }
  fs::path dir = fs::temp_directory_path() / ("kiln-bench-tracker-scale-" + std::to_string(getpid()));
  fs::create_directories(dir);
  try {
    library_costs(runners, jobs);
    fleet_run(dir, runners, jobs, job_ms);
    blob_memory(dir, blob_mb);
  } catch (const std::exception &error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}
