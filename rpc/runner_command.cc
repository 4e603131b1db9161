#include "rpc/runner_command.h"

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "measure/host_runner.h"
#include "measure/sandbox.h"
#include "rpc/client_args.h"
#include "rpc/runner_daemon.h"
#include "support/flag_checks.h"
#include "target/backend.h"
#include "target/target.h"

namespace kiln::rpc {

namespace {

std::atomic<bool> stop_requested{false};
void on_stop_signal(int) { stop_requested = true; }

struct RunnerArgs {
  std::string tracker;
  std::string key;
  ClientArgs client;
  std::string runner_id;
  std::string target;
  std::string cache_dir;
  double run_timeout = 10;
  int64_t memory_limit_mb = 4096;
  int threads = 0;
  int64_t max_blob_mb = 64;
  int64_t max_cache_mb = 1024;
  int64_t max_jobs = 0;
  double poll_wait = 20;
  double max_backoff = 10;
  std::string measurement_lock = measure::default_measurement_lock_path().string();
  std::string measure_server;
  std::string exec_wrapper;
  bool sandbox = true;
};

std::vector<std::string> split_words(const std::string &text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// kiln-measure-server installed beside this program, or where the build tree puts it
// (cli/kiln and rpc/kiln-runner are siblings of measure/).
std::string default_measure_server() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const std::filesystem::path &candidate :
       {self.parent_path() / "kiln-measure-server",
        self.parent_path().parent_path() / "measure" / "kiln-measure-server"}) {
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
  }
  return "";
}

std::string default_cache_dir() {
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/kiln/runner";
  if (const char *home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/kiln/runner";
  return "/tmp/kiln-runner";
}

[[noreturn]] void fail(const std::string &message) {
  std::cerr << "error: " << support::printable(message) << "\n";
  std::exit(1);
}

int run_runner(const RunnerArgs &a) {
  Target target;
  try {
    target = Target::parse(a.target.empty() ? "llvm" : a.target);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  std::unique_ptr<measure::Runner> measurer;
  std::string device_name;
  measure::HostRunnerOptions host;
  // CUDA: a kiln-cuda-measure process per run on this host's GPU, which must be the target's.
  host.cuda.run_timeout_seconds = a.run_timeout;
  // CPU: a wrapper (qemu) runs the measurement server for another architecture.
  host.cpu_server_wrapped = !a.exec_wrapper.empty();
  measure::LocalRunnerOptions &local = host.cpu;
  local.run_timeout_seconds = a.run_timeout;
  local.memory_limit_bytes = a.memory_limit_mb << 20;
  local.num_threads = a.threads;
  local.lock_path = a.measurement_lock;
  local.sandbox.enabled = a.sandbox;
  if (!a.client.token_file.empty()) {
    std::error_code ec;
    std::filesystem::path token = std::filesystem::canonical(a.client.token_file, ec);
    local.sandbox.hidden_files.push_back(ec ? a.client.token_file : token.string());
  }
  if (!target.backend().is_gpu()) {
    if (std::string why = target.backend().why_this_host_cannot_run(target); a.exec_wrapper.empty() && !why.empty()) {
      fail("this host cannot run code for --target '" + target.str() + "': " + why +
           ". Start the runner on such a device, or measure here under an emulator with --exec-wrapper and "
           "--measure-server (e.g. --exec-wrapper \"qemu-aarch64 -L /usr/aarch64-linux-gnu -E "
           "LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib\" --measure-server "
           "kiln-measure-server-aarch64)");
    }
    if (a.sandbox) {
      // Said once, before any job: what a kernel sent here can and cannot do.
      measure::SandboxReport sandbox = measure::probe_sandbox(local.sandbox);
      std::cerr << "kiln runner: candidates run sandboxed: " << sandbox.summary() << "\n";
    } else {
      std::cerr << "kiln runner: --no-sandbox: candidates run as this runner's user, with its network and files\n";
    }
    if (!a.exec_wrapper.empty() && a.measure_server.empty()) {
      fail(
          "--exec-wrapper runs the measurement server under a wrapper: give the server with --measure-server "
          "(e.g. kiln-measure-server-aarch64 for qemu-aarch64)");
    }
    // The server runs as its own program where one is at hand: forking this daemon again
    // later (to replace a dead server) would fork a process that runs gRPC's threads.
    std::string server = a.measure_server.empty() ? default_measure_server() : a.measure_server;
    if (!server.empty()) {
      local.server_command = split_words(a.exec_wrapper);
      local.server_command.push_back(server);
    }
  }
  try {
    // The CPU runner forks its server before gRPC starts any thread.
    measurer = measure::make_host_runner(target, host, &device_name);
  } catch (const measure::HostCannotMeasure &e) {
    fail("this host cannot measure for --target '" + target.str() + "': " + e.why);
  } catch (const std::exception &e) {
    fail(e.what());
  }

  RunnerDaemonOptions options;
  options.key = a.key;
  options.runner_id = a.runner_id;
  options.cache_dir = a.cache_dir.empty() ? default_cache_dir() : a.cache_dir;
  options.max_blob_bytes = a.max_blob_mb << 20;
  options.max_cache_bytes = a.max_cache_mb << 20;
  options.max_jobs = a.max_jobs;
  options.poll_wait_seconds = a.poll_wait;
  options.max_backoff_seconds = a.max_backoff;
  options.target = target.str();
  options.device_name = device_name;
  try {
    options.tracker = a.client.options(a.tracker);
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    RunnerDaemon daemon(options, *measurer, a.run_timeout, std::cerr);
    int64_t jobs = daemon.run(stop_requested);
    std::cerr << "kiln runner: stopped after " << jobs << " jobs\n";
  } catch (const std::exception &e) {
    fail(e.what());
  }
  return 0;
}

}  // namespace

void add_runner_command(CLI::App &app, bool as_main) {
  CLI::App *cmd = as_main ? &app
                          : app.add_subcommand("runner",
                                               "Serve measurements for a tracker: take jobs of one key, run them "
                                               "on this machine, report the results");
  auto a = std::make_shared<RunnerArgs>();
  cmd->add_option("--tracker", a->tracker, "the tracker's HOST:PORT")->required();
  cmd->add_option("--key", a->key, "the device key this runner serves (tuners use tracker://HOST:PORT/KEY)")
      ->required();
  a->client.add_flags(*cmd);
  cmd->add_option("--runner-id", a->runner_id, "stable name of this runner (default: kept in the cache directory)");
  cmd->add_option("--target", a->target,
                  "target reported to the tracker (default: this host: llvm -mcpu=native, resolved to its CPU's name, "
                  "e.g. znver4; `cuda` for this "
                  "host's GPU, measured through its driver by kiln-cuda-measure); tuners without --target compile "
                  "for it");
  cmd->add_option("--cache-dir", a->cache_dir, "where fetched artifacts are kept (default: ~/.cache/kiln/runner)");
  cmd->add_option("--run-timeout", a->run_timeout, "seconds one run (load, check, timing) may take before it is killed")
      ->capture_default_str()
      ->check(support::seconds());
  cmd->add_option("--memory-limit-mb", a->memory_limit_mb, "address space a kernel's process may add")
      ->capture_default_str()
      ->check(support::at_least(1, 1 << 24));
  cmd->add_option("--threads", a->threads, "threads kernels use (0, the default: every core of this host)")
      ->check(support::at_least(0, 1024));
  cmd->add_option("--max-blob-mb", a->max_blob_mb, "refuse larger artifacts without fetching them")
      ->capture_default_str()
      ->check(support::at_least(1, 1 << 20));
  cmd->add_option("--max-cache-mb", a->max_cache_mb, "size of the artifact cache")
      ->capture_default_str()
      ->check(support::at_least(1, 1 << 24));
  cmd->add_option("--max-jobs", a->max_jobs, "exit after this many jobs (0: serve until SIGINT/SIGTERM)")
      ->capture_default_str()
      ->check(support::at_least(0));
  cmd->add_option("--poll-wait", a->poll_wait, "seconds one idle poll waits for a job")
      ->capture_default_str()
      ->check(support::seconds());
  cmd->add_option("--max-backoff", a->max_backoff, "longest wait between reconnect attempts, in seconds")
      ->capture_default_str()
      ->check(support::seconds());
  cmd->add_option("--measurement-lock", a->measurement_lock,
                  "lock file held while a kernel is timed, shared with every Kiln process on this host that "
                  "builds or times (empty: none)")
      ->capture_default_str();
  cmd->add_option("--measure-server", a->measure_server,
                  "the kiln-measure-server program that runs the kernels (default: the one beside this program; "
                  "the AArch64 build with --exec-wrapper to measure AArch64 artifacts)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--exec-wrapper", a->exec_wrapper,
                  "command that runs the measurement server, e.g. \"qemu-aarch64 -L /usr/aarch64-linux-gnu -E "
                  "LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib\" to "
                  "measure AArch64 artifacts on an x86 host (correctness only: emulated timings mean nothing)");
  cmd->add_flag_callback(
      "--no-sandbox", [a] { a->sandbox = false; },
      "run candidates as this runner's user with its network and files (by default each runs in a network "
      "namespace of its own, as nobody when the runner is root, the token file hidden: rpc/README.md)");
  cmd->callback([a] { run_runner(*a); });
}

}  // namespace kiln::rpc
