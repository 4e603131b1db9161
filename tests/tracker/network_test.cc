// The measurement network with real processes on loopback: a `kiln tracker`, several
// `kiln runner`s and the tuner's RemoteRunner, with runners killed, the tracker
// restarted, kernels that hang, tokens, TLS and size caps.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "rpc/connection.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"
#include "rpc/remote_runner.h"
#include "tests/tracker/processes.h"

namespace kiln::tracker {
namespace {

namespace fs = std::filesystem;
using testing::kiln_binary;
using testing::Process;

std::string fixture(const std::string &name) { return std::string(KILN_MEASURE_FIXTURE_DIR) + "/" + name + ".so"; }

measure::RunInput job(const std::string &artifact, double min_repeat_ms = 1) {
  measure::RunInput input;
  input.artifact_path = fixture(artifact);
  input.reference_artifact_path = fixture("reference_add");
  input.input_seed = 7;
  input.timing.repeat = 1;
  input.timing.min_repeat_ms = min_repeat_ms;
  return input;
}

class Network : public ::testing::Test {
 protected:
  Network() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ =
        fs::temp_directory_path() / ("kiln-tracker-test-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Network() override {
    runners_.clear();
    tracker_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  /// Starts the tracker (on `port`, or any free port for 0) with quick loss detection.
  void start_tracker(std::vector<std::string> extra = {}, int port = 0) {
    fs::remove(dir_ / "port");
    std::vector<std::string> args = {kiln_binary(),
                                     "tracker",
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port),
                                     "--port-file",
                                     (dir_ / "port").string(),
                                     "--heartbeat",
                                     "0.5",
                                     "--runner-lost-after",
                                     "3"};
    args.insert(args.end(), extra.begin(), extra.end());
    tracker_ = std::make_unique<Process>(args, dir_ / "tracker.log");
    port_ = testing::wait_for_port(dir_ / "port");
  }

  /// The runner's flags: test defaults, each replaced where `extra` gives the flag.
  std::vector<std::string> runner_args(const std::string &id, std::vector<std::string> extra = {}) {
    std::vector<std::pair<std::string, std::string>> defaults = {
        {"--tracker", address()},
        {"--key", "cpu"},
        {"--runner-id", id},
        {"--cache-dir", (dir_ / ("cache-" + id)).string()},
        {"--measurement-lock", (dir_ / "measure.lock").string()},
        {"--poll-wait", "2"},
        {"--max-backoff", "0.3"},
        {"--memory-limit-mb", "512"},
        {"--run-timeout", "5"}};
    std::vector<std::string> args = {kiln_binary(), "runner"};
    for (const auto &[flag, value] : defaults) {
      if (std::find(extra.begin(), extra.end(), flag) == extra.end()) args.insert(args.end(), {flag, value});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  Process &start_runner(const std::string &id, std::vector<std::string> extra = {}) {
    runners_.push_back(std::make_unique<Process>(runner_args(id, extra), dir_ / ("runner-" + id + ".log")));
    return *runners_.back();
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  /// `kiln tune-op` of `op_args` through the tracker's key "cpu", timed quickly, nothing
  /// re-timed, into `db`; `extra` appended.
  std::vector<std::string> tune_op_args(std::vector<std::string> op_args, const fs::path &db,
                                        std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {kiln_binary(), "tune-op"};
    args.insert(args.end(), op_args.begin(), op_args.end());
    for (const std::string &a : {std::string("--runner"), "tracker://" + address() + "/cpu", std::string("--db"),
                                 db.string(), std::string("--repeat"), std::string("1"), std::string("--min-repeat-ms"),
                                 std::string("1"), std::string("--confirm-top"), std::string("0")})
      args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  /// Submits one good job with `token` (empty: none): "" when it was measured, else why
  /// the tracker refused it.
  std::string submission_refusal(const std::string &token) const {
    rpc::RemoteRunnerOptions options = remote_options();
    options.tracker.token = token;
    try {
      std::vector<measure::RunResult> results = rpc::RemoteRunner(options).run({job("good_add")});
      return results.at(0).ok() ? "" : "measured with an error: " + results[0].message;
    } catch (const std::runtime_error &e) {
      return e.what();
    }
  }

  /// A token file as it must be: the token on its first line, readable by its owner alone.
  static void write_token(const fs::path &path, const std::string &token) {
    std::ofstream(path, std::ios::binary) << token << "\n";
    fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  }

  rpc::RemoteRunnerOptions remote_options() const {
    rpc::RemoteRunnerOptions options;
    options.tracker.address = address();
    options.key = "cpu";
    options.queue_deadline_seconds = 120;
    options.give_up_after_seconds = 60;
    return options;
  }

  fs::path dir_;
  int port_ = 0;
  std::unique_ptr<Process> tracker_;
  std::vector<std::unique_ptr<Process>> runners_;
};

TEST_F(Network, EveryJobHasOneResultWhileRunnersAreKilledTwentyTimes) {
  start_tracker({"--max-runner-losses", "50"});
  for (int i = 0; i < 3; ++i) start_runner("r" + std::to_string(i));
  std::vector<measure::RunInput> batch;
  // Jobs long enough (a 20 ms timed repeat each) that kills land mid-job.
  for (int i = 0; i < 240; ++i) batch.push_back(job(i % 2 ? "good_add" : "parallel_add", 20));
  std::atomic<bool> done{false};
  std::vector<measure::RunResult> results;
  std::thread tuner([&] {
    rpc::RemoteRunner remote(remote_options());
    results = remote.run(batch);
    done = true;
  });
  std::mt19937 random(1234);
  int kills = 0;
  while (!done && kills < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 400)(random)));
    size_t victim = std::uniform_int_distribution<size_t>(0, runners_.size() - 1)(random);
    runners_[victim]->signal(SIGKILL);
    runners_[victim]->wait();
    ++kills;
    // Half come back under their old id (the tracker sees a restart), half as new runners.
    std::string id =
        kills % 2 ? "r" + std::to_string(victim) : "r" + std::to_string(victim) + "-" + std::to_string(kills);
    runners_[victim] = std::make_unique<Process>(runner_args(id), dir_ / ("runner-" + id + ".log"));
  }
  tuner.join();
  EXPECT_EQ(kills, 20) << "the batch ended before 20 kills; make its jobs longer";
  ASSERT_EQ(results.size(), batch.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_TRUE(results[i].ok()) << "job " << i << ": " << results[i].message;
    EXPECT_EQ(results[i].repeat_seconds.size(), 1u);
  }
  // Each job resolved exactly once at the tracker too.
  Process status({kiln_binary(), "tracker", "status", "--tracker", address(), "--json"}, dir_ / "status.json");
  ASSERT_EQ(status.wait(), 0);
  std::string text = status.log();
  EXPECT_NE(text.find("\"jobsSubmitted\": \"240\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"jobsResolved\": \"240\""), std::string::npos) << text;
}

TEST_F(Network, ARestartedTrackerGetsTheJobsAgainAndTheBatchCompletes) {
  start_tracker();
  int port = port_;
  start_runner("a");
  start_runner("b");
  std::vector<measure::RunInput> batch;
  for (int i = 0; i < 120; ++i) batch.push_back(job("good_add", 20));
  std::atomic<bool> done{false};
  std::vector<measure::RunResult> results;
  int64_t resubmitted = 0;
  std::thread tuner([&] {
    rpc::RemoteRunner remote(remote_options());
    results = remote.run(batch);
    resubmitted = remote.resubmitted_jobs();
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_FALSE(done) << "the batch ended before the tracker was restarted; make its jobs longer";
  tracker_->signal(SIGKILL);
  tracker_->wait();
  start_tracker({}, port);
  tuner.join();
  ASSERT_EQ(results.size(), batch.size());
  for (size_t i = 0; i < results.size(); ++i) EXPECT_TRUE(results[i].ok()) << "job " << i << ": " << results[i].message;
  EXPECT_GT(resubmitted, 0);
  EXPECT_LT(resubmitted, static_cast<int64_t>(batch.size()));
}

TEST_F(Network, FailingKernelsAreClassifiedAndAHangIsKilledByTheRunnersTimeout) {
  start_tracker();
  start_runner("only", {"--run-timeout", "1"});
  rpc::RemoteRunner remote(remote_options());
  std::vector<measure::RunResult> results =
      remote.run({job("hang"), job("good_add"), job("segfault"), job("wrong_result"), job("no_entry")});
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[0].error, measure::ErrorKind::kRunTimeout) << results[0].message;
  EXPECT_TRUE(results[1].ok()) << results[1].message;
  EXPECT_EQ(results[2].error, measure::ErrorKind::kRuntimeError) << results[2].message;
  EXPECT_NE(results[2].message.find("SIGSEGV"), std::string::npos) << results[2].message;
  EXPECT_EQ(results[3].error, measure::ErrorKind::kWrongResult) << results[3].message;
  EXPECT_EQ(results[4].error, measure::ErrorKind::kLoadError) << results[4].message;
}

// Tuners and runners hold different tokens: a board's token cannot submit jobs (code
// for the other boards), a tuner's cannot take or report them; each is told which
// token it needs. The two roles' files may not hold one token.
TEST_F(Network, SubmittersAndRunnersHoldTokensOfTheirOwn) {
  write_token(dir_ / "submitter.token", "submit-7f3a");
  write_token(dir_ / "runner.token", "measure-91c2");
  Process same({kiln_binary(), "tracker", "--listen", "127.0.0.1:0", "--submitter-token-file",
                (dir_ / "submitter.token").string(), "--runner-token-file", (dir_ / "submitter.token").string()},
               dir_ / "same.log");
  EXPECT_EQ(same.wait_for(30), 1) << same.log();
  EXPECT_NE(same.log().find("hold the same token"), std::string::npos) << same.log();
  // One role's token without the other's would leave that role open to anyone (a runner
  // with no token took and reported jobs): refused at start, on loopback too.
  for (const char *given : {"--submitter-token-file", "--runner-token-file"}) {
    Process half({kiln_binary(), "tracker", "--listen", "127.0.0.1:0", given, (dir_ / "submitter.token").string()},
                 dir_ / "half.log");
    EXPECT_EQ(half.wait_for(30), 1) << half.log();
    EXPECT_NE(half.log().find("that role would be open to anyone"), std::string::npos) << half.log();
  }

  start_tracker({"--submitter-token-file", (dir_ / "submitter.token").string(), "--runner-token-file",
                 (dir_ / "runner.token").string()});
  Process &tuner_as_runner = start_runner("impostor", {"--token-file", (dir_ / "submitter.token").string()});
  EXPECT_EQ(tuner_as_runner.wait_for(30), 1);
  EXPECT_NE(tuner_as_runner.log().find("a submitter's token cannot take or report jobs"), std::string::npos)
      << tuner_as_runner.log();
  start_runner("board", {"--token-file", (dir_ / "runner.token").string()});

  std::string board_as_tuner = submission_refusal("measure-91c2");
  EXPECT_NE(board_as_tuner.find("a runner's token cannot submit jobs"), std::string::npos) << board_as_tuner;
  EXPECT_EQ(submission_refusal("submit-7f3a"), "");
  // Either role reads the tracker's status.
  for (const char *token : {"submitter.token", "runner.token"}) {
    Process status(
        {kiln_binary(), "tracker", "status", "--tracker", address(), "--token-file", (dir_ / token).string()},
        dir_ / "status.log");
    EXPECT_EQ(status.wait_for(30), 0) << token << "\n" << status.log();
  }
}

TEST_F(Network, CallersWithoutTheTokenAreRefused) {
  write_token(dir_ / "token", "s3cret-token");
  write_token(dir_ / "wrong", "guess");
  start_tracker({"--token-file", (dir_ / "token").string()});
  Process &intruder = start_runner("intruder", {"--token-file", (dir_ / "wrong").string()});
  EXPECT_EQ(intruder.wait_for(30), 1);
  EXPECT_NE(intruder.log().find("token was refused"), std::string::npos) << intruder.log();
  start_runner("member", {"--token-file", (dir_ / "token").string()});

  std::string anonymous = submission_refusal("");
  EXPECT_NE(anonymous.find("requires a token"), std::string::npos) << anonymous;
  EXPECT_EQ(submission_refusal("s3cret-token"), "");
}

// The tracker's and the runner's own inputs: each bad one ends the process at start with
// a message, instead of an abort in gRPC (a NUL in the token), a wrong port ("host:"
// listened on 443, "host:99999" on another port), a retry loop (an empty key) or a
// failure at the first timing (a lock path that is a folder).
TEST_F(Network, CallersWithBadAddressesNamesOrTokensAreRefusedAtStart) {
  auto refused = [&](std::vector<std::string> args, const std::string &message) {
    Process process(args, dir_ / "refused.log");
    EXPECT_EQ(process.wait_for(30), 1) << process.log();
    EXPECT_NE(process.log().find(message), std::string::npos) << process.log();
  };
  for (const std::string listen : {"127.0.0.1:", "127.0.0.1:99999", "localhost:abc", ""}) {
    refused({kiln_binary(), "tracker", "--listen", listen}, "give HOST:PORT");
  }
  write_token(dir_ / "nul.token", std::string("abc\0def", 7));
  refused({kiln_binary(), "tracker", "--listen", "127.0.0.1:0", "--token-file", (dir_ / "nul.token").string()},
          "must be visible ASCII");

  start_tracker();
  refused(runner_args("nul", {"--token-file", (dir_ / "nul.token").string()}), "must be visible ASCII");
  refused(runner_args("noport", {"--tracker", "127.0.0.1"}), "has no port");
  refused(runner_args("wrapped", {"--tracker", "127.0.0.1:99999"}), "outside 1 to 65535");
  refused(runner_args("empty-key", {"--key", ""}), "--key '' is empty");
  refused(runner_args("escape", {"--key", "cpu\x1b[2J"}), "may hold only letters");
  refused(runner_args("a\nb"), "--runner-id");
  fs::create_directories(dir_ / "lock-dir");
  refused(runner_args("lock", {"--measurement-lock", (dir_ / "lock-dir").string()}),
          "cannot open the measurement lock file");
  std::ofstream(dir_ / "not-a-dir") << "x";
  refused(runner_args("cache", {"--cache-dir", (dir_ / "not-a-dir").string()}),
          "give a writable folder with --cache-dir");
  // An id kept in the cache by another tool or an older version.
  fs::create_directories(dir_ / "kept");
  std::ofstream(dir_ / "kept" / "runner-id") << "id with blanks\n";
  std::vector<std::string> kept = runner_args("unused", {"--cache-dir", (dir_ / "kept").string()});
  auto id = std::find(kept.begin(), kept.end(), "--runner-id");
  kept.erase(id, id + 2);
  refused(kept, "delete the file");

  // Callers that do not use Kiln's client are refused by the tracker itself.
  rpc::ClientOptions client;
  client.address = address();
  auto stub = rpc::v1::Tracker::NewStub(rpc::make_channel(client));
  rpc::v1::RunnerPollRequest poll;
  poll.set_protocol_version(rpc::v1::PROTOCOL_VERSION_1);
  poll.set_runner_id("r1");
  poll.set_key("cpu\x1b[2J");
  rpc::v1::RunnerPollResponse response;
  grpc::Status status = stub->RunnerPoll(rpc::make_context(client, 10).get(), poll, &response);
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("the key may hold only"), std::string::npos) << status.error_message();
  poll.set_key("cpu");
  poll.mutable_facts()->set_target(std::string("llvm\0", 5));
  status = stub->RunnerPoll(rpc::make_context(client, 10).get(), poll, &response);
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  rpc::v1::SubmitRequest submit;
  submit.set_protocol_version(rpc::v1::PROTOCOL_VERSION_1);
  submit.set_session_id(std::string(rpc::kMaxNameBytes + 1, 's'));
  submit.set_key("cpu");
  rpc::v1::SubmitResponse submitted;
  status = stub->Submit(rpc::make_context(client, 10).get(), submit, &submitted);
  EXPECT_EQ(status.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("the session_id is longer"), std::string::npos) << status.error_message();
}

TEST_F(Network, AMeasurementServerThatCannotStartStopsTheRunnerWithAMessage) {
  start_tracker();
  Process &runner =
      start_runner("broken", {"--measure-server", std::string(KILN_BINARY_DIR) + "/measure/kiln-measure-server",
                              "--exec-wrapper", "/nonexistent/qemu-wrapper"});
  EXPECT_EQ(runner.wait_for(30), 1);
  EXPECT_NE(runner.log().find("cannot start the measurement server '/nonexistent/qemu-wrapper'"), std::string::npos)
      << runner.log();
}

TEST_F(Network, TlsWithACertificateMadeForTheTest) {
  std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      (dir_ / "key.pem").string() + " -out " + (dir_ / "cert.pem").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << "openssl could not make a certificate";
  write_token(dir_ / "token", "tls-token");
  start_tracker({"--tls-cert", (dir_ / "cert.pem").string(), "--tls-key", (dir_ / "key.pem").string(), "--token-file",
                 (dir_ / "token").string()});
  start_runner("tls", {"--tls-ca", (dir_ / "cert.pem").string(), "--token-file", (dir_ / "token").string()});
  rpc::RemoteRunnerOptions options = remote_options();
  options.tracker.token = "tls-token";
  options.tracker.tls_ca_pem = rpc::read_pem_file(dir_ / "cert.pem", "CA certificate");
  std::vector<measure::RunResult> results = rpc::RemoteRunner(options).run({job("good_add"), job("wrong_result")});
  EXPECT_TRUE(results.at(0).ok()) << results[0].message;
  EXPECT_EQ(results.at(1).error, measure::ErrorKind::kWrongResult);

  // Plaintext against the TLS port never gets through.
  rpc::RemoteRunnerOptions plaintext = remote_options();
  plaintext.tracker.token = "tls-token";
  plaintext.give_up_after_seconds = 2;
  EXPECT_THROW(rpc::RemoteRunner(plaintext).run({job("good_add")}), std::runtime_error);
}

TEST_F(Network, AnArtifactOverTheCapIsRefusedWithAMessage) {
  start_tracker({"--max-blob-mb", "1"});
  fs::path big = dir_ / "big.so";
  std::ofstream(big) << std::string((1 << 20) + 1, 'x');
  measure::RunInput input = job("good_add");
  input.artifact_path = big.string();
  try {
    rpc::RemoteRunner(remote_options()).run({input});
    ADD_FAILURE() << "an oversized artifact was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("over the tracker's cap"), std::string::npos) << e.what();
  }
}

// A runner pointed at a port where nothing listens says what it waits for, and backs
// off exponentially up to --max-backoff, logging every interval.
TEST_F(Network, ARunnerWithoutItsTrackerLogsEveryRetryWithGrowingIntervals) {
  int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(sock, reinterpret_cast<sockaddr *>(&addr), &len), 0);
  close(sock);  // bound, never listened: connections to it are refused
  const std::string nowhere = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  Process &runner = start_runner("lonely", {"--tracker", nowhere, "--max-backoff", "0.5"});
  std::vector<double> intervals;
  const std::string waiting = "kiln runner: waiting for the tracker at " + nowhere + " (";
  for (int i = 0; i < 1000 && intervals.size() < 10; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    intervals.clear();
    std::istringstream lines(runner.log());
    for (std::string line; std::getline(lines, line);) {
      size_t next = line.find("; next try in ");
      if (line.rfind(waiting, 0) == 0 && next != std::string::npos)
        intervals.push_back(std::stod(line.substr(next + 14)));
    }
  }
  runner.signal(SIGTERM);
  EXPECT_EQ(runner.wait_for(30), 0) << runner.log();
  ASSERT_GE(intervals.size(), 10u) << runner.log();
  EXPECT_LE(intervals.front(), 0.15) << runner.log();
  EXPECT_GT(intervals[4], intervals[0]) << runner.log();
  for (double interval : intervals) EXPECT_LE(interval, 0.5) << runner.log();
  EXPECT_GE(intervals.back(), 0.4) << "the cap (within its jitter) was not reached\n" << runner.log();
}

// SIGTERM to an idle runner in a 60 s long poll cancels the poll: the runner exits
// instead of waiting the poll out (it used to take the whole wait).
TEST_F(Network, ARunnerStoppedWhileIdleLeavesItsLongPoll) {
  start_tracker();
  Process &runner = start_runner("idle", {"--poll-wait", "60"});
  // The tracker knows the runner once its first poll arrives: it is waiting in it now.
  rpc::remote_target(remote_options().tracker, "cpu");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  runner.signal(SIGTERM);
  EXPECT_EQ(runner.wait_for(20), 0) << "still in its 60 s poll\n" << runner.log();
  EXPECT_NE(runner.log().find("stopped after 0 jobs"), std::string::npos) << runner.log();
}

// The batch says at once that the key has no runner, and again while it waits, before
// it ends with an error at the queue deadline.
TEST_F(Network, AKeyWithoutRunnersEndsTheBatchWithAClearError) {
  start_tracker();
  rpc::RemoteRunnerOptions options = remote_options();
  options.key = "jetson-orin";
  options.queue_deadline_seconds = 2;
  options.status_interval_seconds = 0.5;
  std::ostringstream log;
  options.log = &log;
  try {
    rpc::RemoteRunner(options).run({job("good_add")});
    ADD_FAILURE() << "a batch without runners did not fail";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("--key jetson-orin"), std::string::npos) << e.what();
  }
  const std::string said = log.str();
  const std::string no_runner = "has no runner of key 'jetson-orin'; 1 of 1 jobs wait for one (0 s so far";
  EXPECT_EQ(said.rfind("remote runner: the tracker at " + address() + " " + no_runner, 0), 0u) << said;
  EXPECT_NE(said.find("Start one on the device: kiln runner --tracker " + address() + " --key jetson-orin"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("has no runner of key 'jetson-orin' yet"), std::string::npos) << said;
  EXPECT_THROW(rpc::remote_target(options.tracker, "jetson-orin"), std::runtime_error);
}

// A job for another target than the key's runners measure is refused before anything
// is dispatched (the tracker would refuse each batch, and the refusals were stored as
// load errors with "no valid candidate yet"), and a batch the tracker refuses whole
// stops the tuner with the tracker's reason instead of failed records.
TEST_F(Network, AKeyOfAnotherTargetRefusesTheJobBeforeDispatch) {
  start_tracker();
  start_runner("a");
  const std::string host_target = rpc::remote_target(remote_options().tracker, "cpu");  // waits for the runner
  const std::string arm = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78";
  fs::path db = dir_ / "arm.db";
  Process tune(tune_op_args({"--op", "matmul", "--shape", "16x16", "--shape", "16x16", "--trials", "8"}, db,
                            {"--target", arm, "-q"}),
               dir_ / "arm.log");
  EXPECT_EQ(tune.wait(), 1) << tune.log();
  EXPECT_NE(tune.log().find("the runners of key 'cpu' at " + address() + " measure '" + host_target + "'"),
            std::string::npos)
      << tune.log();
  EXPECT_FALSE(fs::exists(db)) << "nothing stored";

  rpc::RemoteRunnerOptions options = remote_options();
  options.target = "llvm -mcpu=cortex-a78 -mtriple=aarch64-linux-gnu -num-cores=4";
  try {
    std::vector<measure::RunResult> results = rpc::RemoteRunner(options).run({job("good_add")});
    ADD_FAILURE() << "a batch for another target was measured: " << results.at(0).message;
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("the tracker refused every job of the batch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the runners of key 'cpu' are"), std::string::npos) << e.what();
  }
}

TEST_F(Network, TuneOpThroughTheTrackerStoresOneRecordPerCandidate) {
  start_tracker();
  start_runner("a");
  start_runner("b");
  fs::path db = dir_ / "tune.db";
  Process tune(
      tune_op_args({"--op", "matmul", "--shape", "32x32", "--shape", "32x32", "--trials", "48", "--batch", "16"}, db,
                   {"-q"}),
      dir_ / "tune.log");
  ASSERT_EQ(tune.wait(), 0) << tune.log();
  // The target came from the runners: this host's concrete CPU, not "native".
  EXPECT_EQ(tune.log().find("-mcpu=native"), std::string::npos) << tune.log();
  Process stats({kiln_binary(), "db", "stats", "--db", db.string()}, dir_ / "stats.log");
  ASSERT_EQ(stats.wait(), 0) << stats.log();
  EXPECT_NE(stats.log().find("48"), std::string::npos) << stats.log();
  // Each record says which runner measured it, and what that runner is.
  Process records({kiln_binary(), "db", "export", "--db", db.string()}, dir_ / "records.log");
  ASSERT_EQ(records.wait(), 0) << records.log();
  size_t by_a = 0, by_b = 0;
  for (size_t at = records.log().find("\"measured_by\":{"); at != std::string::npos;
       at = records.log().find("\"measured_by\":{", at + 1)) {
    std::string by = records.log().substr(at, records.log().find('}', at) - at);
    EXPECT_NE(by.find("\"hostname\":"), std::string::npos) << by;
    EXPECT_NE(by.find("\"target\":\"llvm -mcpu="), std::string::npos) << by;
    by_a += by.find("\"runner\":\"a\"") != std::string::npos;
    by_b += by.find("\"runner\":\"b\"") != std::string::npos;
  }
  EXPECT_EQ(by_a + by_b, 48u) << records.log().substr(0, 3000);
}

// A tuner suspended for longer than the tracker's session timeout (a laptop's lid, a
// Ctrl-Z) finds its session dropped when it resumes: it submits its jobs again and
// finishes, instead of polling an empty session forever.
TEST_F(Network, ASuspendedTunerSubmitsItsDroppedJobsAgain) {
  start_tracker({"--session-timeout", "1"});
  fs::path db = dir_ / "suspended.db";
  Process tune(tune_op_args({"--op", "relu", "--shape", "256", "--trials", "4", "--batch", "4"}, db,
                            {"--target", "llvm -mcpu=native"}),
               dir_ / "suspended.log");
  // Its jobs queued (no runner yet), the tuner stops: its long poll of results, already
  // at the tracker, keeps the session alive for up to 10 s, then the session timeout runs.
  for (int i = 0; i < 200 && tune.log().find("jobs wait for one") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_NE(tune.log().find("jobs wait for one"), std::string::npos) << tune.log();
  tune.signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::seconds(13));
  tune.signal(SIGCONT);
  start_runner("late");
  ASSERT_EQ(tune.wait_for(120), 0) << tune.log();
  EXPECT_NE(tune.log().find("the tracker dropped this tuner's session"), std::string::npos) << tune.log();
  EXPECT_NE(tune.log().find("measured 4 candidates"), std::string::npos) << tune.log();
}

// A GPU runner: `kiln runner --target cuda…` measures CUDA artifacts with the CUDA
// runner. Without a GPU here, a stand-in for kiln-cuda-measure answers for the device
// (tests/cli/fixtures/stand_in_gpu.py: zeros, a time by threads per block); the rest is
// real: the tuner takes the cuda target from the runner, samples GPU programs, builds
// CUDA artifacts, ships them through the tracker, and stores what the runner reports.
TEST_F(Network, TuneOpForACudaTargetRunsOnAGpuRunner) {
  start_tracker();
  std::string stand_in = std::string(KILN_SOURCE_DIR) + "/tests/cli/fixtures/stand_in_gpu.py";
  setenv("KILN_CUDA_MEASURE", stand_in.c_str(), 1);
  start_runner("gpu", {"--key", "h100", "--target", "cuda -arch=sm_90"});
  unsetenv("KILN_CUDA_MEASURE");
  fs::path db = dir_ / "gpu.db";
  Process tune({kiln_binary(), "tune-op", "--op", "softmax", "--shape", "64x300", "--trials", "12", "--batch", "6",
                "--runner", "tracker://" + address() + "/h100", "--db", db.string(), "--confirm-top", "0", "-q"},
               dir_ / "tune.log");
  ASSERT_EQ(tune.wait(), 0) << tune.log() << runners_[0]->log();
  EXPECT_NE(tune.log().find("cuda -arch=sm_90"), std::string::npos) << tune.log();
  Process stats({kiln_binary(), "db", "stats", "--db", db.string()}, dir_ / "stats.log");
  ASSERT_EQ(stats.wait(), 0) << stats.log();
  EXPECT_NE(stats.log().find("12 records, 12 successful"), std::string::npos) << stats.log();
  Process status({kiln_binary(), "tracker", "status", "--tracker", address()}, dir_ / "status.log");
  ASSERT_EQ(status.wait(), 0) << status.log();
  EXPECT_NE(status.log().find("cuda -arch=sm_90 (stand-in GPU)"), std::string::npos) << status.log();
}

TEST_F(Network, AnAArch64TuningJobRunsOnARunnerUnderQemu) {
  start_tracker();
  // "The board": an x86 runner whose measurement server is the AArch64 build, run
  // under qemu. The tuner takes the target from it, cross-compiles, and every result
  // is checked against the reference run under emulation too.
  start_runner("board", {"--key", "arm", "--target", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
                         "--measure-server", KILN_MEASURE_SERVER_AARCH64, "--exec-wrapper",
                         std::string(KILN_QEMU_AARCH64) +
                             " -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib",
                         "--run-timeout", "60"});
  fs::path db = dir_ / "arm.db";
  Process tune({kiln_binary(),
                "tune-op",
                "--op",
                "matmul",
                "--shape",
                "16x24",
                "--shape",
                "24x8",
                "--trials",
                "16",
                "--batch",
                "8",
                "--runner",
                "tracker://" + address() + "/arm",
                "--db",
                db.string(),
                "--repeat",
                "1",
                "--min-repeat-ms",
                "0",
                "--confirm-top",
                "0",
                "-q"},
               dir_ / "tune.log");
  ASSERT_EQ(tune.wait(), 0) << tune.log();
  EXPECT_NE(tune.log().find("aarch64-linux-gnu"), std::string::npos) << tune.log();
  Process stats({kiln_binary(), "db", "stats", "--db", db.string()}, dir_ / "stats.log");
  ASSERT_EQ(stats.wait(), 0) << stats.log();
  EXPECT_NE(stats.log().find("16 records, 16 successful"), std::string::npos) << stats.log();
}

TEST(SlimRunner, KilnRunnerNeedsNoCompilerLibraries) {
  std::string runner = std::string(KILN_BINARY_DIR) + "/rpc/kiln-runner";
  ASSERT_TRUE(fs::exists(runner));
  std::string command = "readelf -d " + runner + " 2>&1";
  FILE *pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string dynamic;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) dynamic.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << dynamic;
  EXPECT_NE(dynamic.find("libgrpc++"), std::string::npos) << dynamic;
  for (const char *compiler_library : {"libLLVM", "libxgboost", "libsqlite3", "libonnx", "libclang"}) {
    EXPECT_EQ(dynamic.find(compiler_library), std::string::npos) << compiler_library << " in\n" << dynamic;
  }
}

}  // namespace
}  // namespace kiln::tracker
