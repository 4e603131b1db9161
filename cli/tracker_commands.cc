#include "cli/tracker_commands.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>

#include "support/flag_checks.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include <google/protobuf/util/json_util.h>

#include "cli/workload_args.h"
#include "rpc/client_args.h"
#include "rpc/connection.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"
#include "rpc/runner_command.h"
#include "tracker/tracker_server.h"

namespace kiln::cli {

namespace {

std::atomic<bool> stop_requested{false};
void on_stop_signal(int) { stop_requested = true; }

struct TrackerArgs {
  std::string listen = "127.0.0.1:9190";
  std::string token_file, submitter_token_file, runner_token_file;
  std::string tls_cert;
  std::string tls_key;
  bool insecure = false;
  std::string port_file;
  int64_t max_blob_mb = 64;
  int64_t max_store_mb = 2048;
  int64_t blob_memory_kb = tracker::BlobStoreOptions{}.max_memory_blob_bytes >> 10;
  std::string blob_dir;
  int max_runner_losses = 2;
  double heartbeat = 5;
  double session_timeout = tracker::DispatcherOptions{}.session_idle_seconds;
  double runner_lost_after = 15;
  double queue_deadline = 600;
};

struct StatusArgs {
  std::string tracker = "127.0.0.1:9190";
  rpc::ClientArgs client;
  bool json = false;
};

void serve(const TrackerArgs &a) {
  tracker::TrackerOptions options;
  options.listen_address = a.listen;
  options.insecure = a.insecure;
  options.blobs.max_blob_bytes = a.max_blob_mb << 20;
  options.blobs.max_total_bytes = a.max_store_mb << 20;
  options.blobs.max_memory_blob_bytes = a.blob_memory_kb << 10;
  options.blobs.spill_directory = a.blob_dir;
  options.dispatcher.max_runner_losses = a.max_runner_losses;
  options.dispatcher.heartbeat_seconds = a.heartbeat;
  options.dispatcher.session_idle_seconds = a.session_timeout;
  options.dispatcher.runner_lost_after_seconds = a.runner_lost_after;
  options.dispatcher.default_queue_deadline_seconds = a.queue_deadline;
  std::unique_ptr<tracker::TrackerServer> server;
  try {
    rpc::parse_host_port(a.listen, "--listen", /*allow_any_port=*/true);
    if (!a.token_file.empty()) {
      options.tokens.submitter = options.tokens.runner = rpc::read_token_file(a.token_file);
      if (!rpc::is_loopback_address(a.listen))
        std::cerr << "warning: one --token-file for tuners and runners: a board that holds it can also submit code "
                     "to every other board; give --submitter-token-file and --runner-token-file instead\n";
    }
    if (!a.submitter_token_file.empty()) options.tokens.submitter = rpc::read_token_file(a.submitter_token_file);
    if (!a.runner_token_file.empty()) options.tokens.runner = rpc::read_token_file(a.runner_token_file);
    if (!a.submitter_token_file.empty() && !a.runner_token_file.empty() &&
        options.tokens.submitter == options.tokens.runner)
      fail(
          "--submitter-token-file and --runner-token-file hold the same token: give each role its own (e.g. "
          "`openssl rand -hex 32 > runner.token`), or one --token-file for both");
    if (!a.tls_cert.empty()) options.tls_cert_pem = rpc::read_pem_file(a.tls_cert, "TLS certificate");
    if (!a.tls_key.empty()) options.tls_key_pem = rpc::read_pem_file(a.tls_key, "TLS key");
    if ((options.tokens.submitter.empty() || options.tokens.runner.empty()) && !rpc::is_loopback_address(a.listen)) {
      std::cerr << "warning: " << (options.tokens.submitter.empty() ? "no submitter token" : "no runner token")
                << " (--insecure): anyone who reaches " << a.listen
                << (options.tokens.submitter.empty() ? " can submit code for the runners to execute\n"
                                                     : " can pose as a runner and report any latency\n");
    }
    server = std::make_unique<tracker::TrackerServer>(options);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  std::string host = a.listen.substr(0, a.listen.rfind(':'));
  std::cerr << "kiln tracker " << server->dispatcher().instance_id() << " listening on " << host << ":"
            << server->port() << (options.tls_cert_pem.empty() ? " (plaintext)" : " (TLS)")
            << (options.tokens.submitter.empty() && options.tokens.runner.empty() ? ""
                : options.tokens.submitter == options.tokens.runner               ? ", token required"
                                                                                  : ", a token per role required")
            << std::endl;
  if (!a.port_file.empty()) {
    // Written whole under another name first: a reader never sees a partial number.
    std::string temporary = a.port_file + ".tmp";
    std::ofstream port(temporary);
    port << server->port() << "\n";
    port.close();
    if (!port || std::rename(temporary.c_str(), a.port_file.c_str()) != 0) {
      std::string why = std::strerror(errno);
      server->shut_down();
      fail("cannot write --port-file " + a.port_file + ": " + why);
    }
  }
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::thread watcher([&] {
    while (!stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server->shut_down();
  });
  server->wait();
  stop_requested = true;
  watcher.join();
  std::cerr << "kiln tracker: stopped\n";
}

void print_status(const StatusArgs &a) {
  rpc::ClientOptions client;
  kiln::rpc::v1::StatusResponse status;
  grpc::Status s;
  try {
    client = a.client.options(a.tracker);
    auto stub = kiln::rpc::v1::Tracker::NewStub(rpc::make_channel(client));
    auto context = rpc::make_context(client, 10);
    s = stub->Status(context.get(), kiln::rpc::v1::StatusRequest{}, &status);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  if (!s.ok()) fail("cannot get the status of the tracker at " + a.tracker + ": " + rpc::describe(s));
  if (a.json) {
    std::string text;
    google::protobuf::util::JsonPrintOptions json_options;
    json_options.add_whitespace = true;
    google::protobuf::util::MessageToJsonString(status, &text, json_options);
    std::cout << text;
    return;
  }
  std::printf(
      "tracker %s, up %.0f s: %lld jobs submitted, %lld resolved, %lld re-dispatched, %lld late results "
      "discarded; %lld blobs (%.1f MiB)\n",
      status.tracker_instance_id().c_str(), status.uptime_seconds(), (long long)status.jobs_submitted(),
      (long long)status.jobs_resolved(), (long long)status.redispatches(), (long long)status.stale_results(),
      (long long)status.blobs(), status.blob_bytes() / 1048576.0);
  std::printf("\n%-24s %8s %8s %10s %14s\n", "key", "runners", "queued", "in flight", "oldest queued");
  for (const auto &k : status.keys()) {
    std::printf("%-24s %8d %8d %10d %12.1f s\n", k.key().c_str(), k.runners(), k.queued(), k.in_flight(),
                k.oldest_queued_seconds());
  }
  std::printf("\n%-28s %-16s %-5s %9s %8s %7s %9s  %s\n", "runner", "key", "state", "last poll", "done", "failed",
              "jobs/s", "target");
  for (const auto &r : status.runners()) {
    // A GPU runner's target names its arch; the GPU's own name follows.
    std::string target = r.facts().target();
    if (!r.facts().device_name().empty()) target += " (" + r.facts().device_name() + ")";
    std::printf("%-28s %-16s %-5s %7.1f s %8lld %7lld %9.2f  %s\n", r.runner_id().c_str(), r.key().c_str(),
                r.state().c_str(), r.seconds_since_poll(), (long long)r.jobs_done(), (long long)r.jobs_failed(),
                r.jobs_per_second(), support::printable(target).c_str());
  }
}

}  // namespace

void add_tracker_commands(CLI::App &app) {
  auto *cmd = app.add_subcommand("tracker",
                                 "Run the measurement tracker: runners connect to it, tuners submit "
                                 "candidates through it (`kiln tracker status` shows its state)");
  auto a = std::make_shared<TrackerArgs>();
  cmd->add_option("--listen", a->listen, "HOST:PORT to serve on (port 0: any free port)")->capture_default_str();
  auto *submitter = cmd->add_option("--submitter-token-file", a->submitter_token_file,
                                    "file (mode 600) whose first line is the token tuners must send to submit jobs")
                        ->check(CLI::ExistingFile);
  auto *runner = cmd->add_option("--runner-token-file", a->runner_token_file,
                                 "file (mode 600) whose first line is the token runners must send to take and report "
                                 "jobs; another token than the submitters'")
                     ->check(CLI::ExistingFile);
  cmd->add_option("--token-file", a->token_file,
                  "one token for tuners and runners alike (a board holding it can also submit code): prefer the two "
                  "above")
      ->check(CLI::ExistingFile)
      ->excludes(submitter)
      ->excludes(runner);
  cmd->add_option("--tls-cert", a->tls_cert, "PEM certificate of this tracker (with --tls-key: TLS)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", a->tls_key, "PEM private key of the certificate")->check(CLI::ExistingFile);
  cmd->add_flag("--insecure", a->insecure, "serve plaintext on a non-loopback address");
  cmd->add_option("--port-file", a->port_file, "write the port served on to this file once listening");
  cmd->add_option("--max-blob-mb", a->max_blob_mb, "refuse larger artifacts before receiving them")
      ->capture_default_str()
      ->check(at_least(1, 1 << 20));
  cmd->add_option("--max-store-mb", a->max_store_mb, "memory and disk for artifacts of queued jobs")
      ->capture_default_str()
      ->check(at_least(1, 1 << 24));
  cmd->add_option("--blob-memory-kb", a->blob_memory_kb,
                  "artifacts larger than this are kept in files under --blob-dir, not in memory")
      ->capture_default_str()
      ->check(at_least(0, 1 << 20));
  cmd->add_option("--blob-dir", a->blob_dir,
                  "directory for the large artifacts (default: a private directory under $TMPDIR, removed at exit)");
  cmd->add_option("--max-runner-losses", a->max_runner_losses,
                  "a job whose runner is lost this often fails as RUNNER_LOST instead of being re-dispatched")
      ->capture_default_str()
      ->check(at_least(1, 1000));
  cmd->add_option("--heartbeat", a->heartbeat, "seconds between a busy runner's polls")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--session-timeout", a->session_timeout,
                  "seconds a tuner may be silent before its session and its jobs are dropped (it submits them again "
                  "when it comes back)")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--runner-lost-after", a->runner_lost_after, "seconds of silence after which a runner is lost")
      ->capture_default_str()
      ->check(seconds());
  cmd->add_option("--queue-deadline", a->queue_deadline,
                  "seconds a job may wait for a runner before it fails as NO_RUNNER (a tuner may ask for another)")
      ->capture_default_str()
      ->check(seconds());

  auto *status = cmd->add_subcommand("status", "Show the tracker's runners, keys, queues and counters");
  auto s = std::make_shared<StatusArgs>();
  status->add_option("--tracker", s->tracker, "the tracker's HOST:PORT")->capture_default_str();
  s->client.add_flags(*status);
  status->add_flag("--json", s->json, "print the status as JSON");
  status->callback([s] { print_status(*s); });

  cmd->callback([cmd, a] {
    if (cmd->got_subcommand("status")) return;
    serve(*a);
  });
  rpc::add_runner_command(app);
}

}  // namespace kiln::cli
