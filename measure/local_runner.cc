#include "measure/local_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "measure/runner_server.h"
#include "measure/subprocess.h"
#include "measure/wire_format.h"
#include "support/json_read.h"

namespace kiln::measure {

std::string default_runtime_library_path() {
#ifdef KILN_RUNTIME_LIBRARY_PATH
  return KILN_RUNTIME_LIBRARY_PATH;
#else
  return "";
#endif
}

LocalRunner::LocalRunner(LocalRunnerOptions options)
    : options_(std::move(options)), lock_(options_.lock_path, options_.lock_wait_seconds) {
  // Past a day the deadline arithmetic overflows the clock; NaN would kill at once.
  if (!(options_.run_timeout_seconds > 0 && options_.run_timeout_seconds <= 86400)) {
    throw std::invalid_argument("the run timeout must be a number of seconds above 0 and at most 86400, not " +
                                std::to_string(options_.run_timeout_seconds));
  }
  if (options_.memory_limit_bytes <= 0) throw std::invalid_argument("the memory limit must be positive");
  start_server();
}

LocalRunner::~LocalRunner() { stop_server(); }

void LocalRunner::start_server() {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    throw std::runtime_error(std::string("cannot start the runner: socketpair failed: ") + std::strerror(errno));
  }
  detail::ServerOptions server_options;
  server_options.run_timeout_seconds = options_.run_timeout_seconds;
  server_options.memory_limit_bytes = options_.memory_limit_bytes;
  server_options.num_threads = options_.num_threads;
  server_options.reference_cache_bytes = options_.reference_cache_bytes;
  server_options.runtime_library = options_.runtime_library;
  server_options.sandbox = options_.sandbox;
  // Built before the fork: the child of a threaded process must not allocate.
  std::vector<std::string> exec_args;
  if (!options_.server_command.empty()) {
    exec_args = options_.server_command;
    for (const std::string &arg :
         {std::string("--fd"), std::string("3"), std::string("--run-timeout"),
          std::to_string(options_.run_timeout_seconds), std::string("--memory-limit"),
          std::to_string(options_.memory_limit_bytes), std::string("--threads"), std::to_string(options_.num_threads),
          std::string("--reference-cache"), std::to_string(options_.reference_cache_bytes)}) {
      exec_args.push_back(arg);
    }
    if (options_.sandbox.enabled) exec_args.push_back("--sandbox");
    for (const std::string &file : options_.sandbox.hidden_files) exec_args.insert(exec_args.end(), {"--hide", file});
  }
  std::vector<char *> exec_argv;
  for (std::string &arg : exec_args) exec_argv.push_back(arg.data());
  if (!exec_argv.empty()) exec_argv.push_back(nullptr);
  // A failed exec reports its errno through this pipe; a successful one closes it.
  int exec_status[2] = {-1, -1};
  if (!exec_argv.empty() && pipe2(exec_status, O_CLOEXEC) != 0) {
    close(sockets[0]);
    close(sockets[1]);
    throw std::runtime_error(std::string("cannot start the runner: pipe failed: ") + std::strerror(errno));
  }
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    close(sockets[0]);
    close(sockets[1]);
    if (exec_status[0] >= 0) {
      close(exec_status[0]);
      close(exec_status[1]);
    }
    throw std::runtime_error(std::string("cannot start the runner: fork failed: ") + std::strerror(error));
  }
  if (pid == 0) {
    close(sockets[0]);
    if (!exec_argv.empty()) {
      // Only async-signal-safe calls from here to exec. The socket becomes descriptor
      // 3, open across exec; everything else above 2 closes at exec, the status pipe
      // included, which tells the parent that exec worked.
      int status_fd = fcntl(exec_status[1], F_DUPFD_CLOEXEC, 64);
      int socket_fd = fcntl(sockets[1], F_DUPFD, 64);
      if (status_fd < 0 || socket_fd < 0 || dup2(socket_fd, 3) < 0) _exit(126);
      if (close_range(4, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        for (int other = 4; other < 65536; ++other) fcntl(other, F_SETFD, FD_CLOEXEC);
      }
      execvp(exec_argv[0], exec_argv.data());
      int error = errno;
      ssize_t ignored = write(status_fd, &error, sizeof error);
      (void)ignored;
      _exit(127);
    }
    int fd = detail::keep_only_fd(sockets[1]);
    try {
      detail::serve(fd, server_options);
    } catch (...) {
      _exit(1);
    }
    // _exit: the tuner's static destructors and atexit handlers are not ours to run.
    _exit(0);
  }
  close(sockets[1]);
  if (exec_status[0] >= 0) {
    close(exec_status[1]);
    int error = 0;
    ssize_t n;
    while ((n = read(exec_status[0], &error, sizeof error)) < 0 && errno == EINTR) {
    }
    close(exec_status[0]);
    if (n > 0) {
      close(sockets[0]);
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      throw std::runtime_error("cannot start the measurement server '" + options_.server_command.front() +
                               "': " + std::strerror(error));
    }
  }
  server_pid_ = pid;
  server_socket_ = sockets[0];
}

void LocalRunner::stop_server() {
  if (server_pid_ < 0) return;
  close(server_socket_);  // the server exits when it reads end-of-file
  server_socket_ = -1;
  int status;
  // A server stuck in a candidate run notices only after that run's timeout: don't wait.
  if (waitpid(server_pid_, &status, WNOHANG) == 0) {
    kill(server_pid_, SIGKILL);
    while (waitpid(server_pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  server_pid_ = -1;
}

std::vector<RunResult> LocalRunner::run(const std::vector<RunInput> &batch) {
  std::vector<RunResult> results;
  if (options_.interleave_batches && batch.size() > 1) {
    std::lock_guard<std::mutex> serialize(mutex_);
    MeasurementLock::Guard alone = lock_.exclusive();
    results = run_batch_locked(batch);
  } else {
    results.reserve(batch.size());
    for (const RunInput &input : batch) results.push_back(run_one(input));
  }
  // Records say where their timings come from: this machine.
  static const std::string here = [] {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return nlohmann::json{{"runner", "local"}, {"hostname", std::string(name)}}.dump(
        -1, ' ', false, nlohmann::json::error_handler_t::replace);
  }();
  for (RunResult &r : results) r.measured_by = here;
  return results;
}

RunResult LocalRunner::run_one(const RunInput &input) {
  std::lock_guard<std::mutex> serialize(mutex_);
  MeasurementLock::Guard alone = lock_.exclusive();
  return run_locked(input);
}

std::optional<std::string> LocalRunner::request(const std::string &frame, double reply_timeout_seconds,
                                                const std::string &what, std::string *failure) {
  if (server_pid_ < 0) start_server();
  if (!detail::write_frame(server_socket_, frame)) {
    // The server is gone (killed from outside?): start a new one and retry once.
    stop_server();
    start_server();
    if (!detail::write_frame(server_socket_, frame)) {
      *failure = "the runner's server process is not accepting requests";
      return std::nullopt;
    }
  }
  // The server enforces the timeouts; this deadline only guards against the server
  // itself hanging.
  auto deadline = detail::Clock::now() + std::chrono::duration_cast<detail::Clock::duration>(
                                             std::chrono::duration<double>(reply_timeout_seconds));
  std::string reply;
  detail::ReadStatus status = detail::read_frame(server_socket_, reply, deadline);
  if (status != detail::ReadStatus::kOk) {
    stop_server();
    *failure = status == detail::ReadStatus::kTimeout
                   ? "the runner's server process stopped responding and was restarted"
                   : "the runner's server process died while running " + what + " and was restarted";
    return std::nullopt;
  }
  return reply;
}

RunResult LocalRunner::run_locked(const RunInput &input) {
  RunResult failure;
  failure.error = ErrorKind::kRuntimeError;
  // Reference + candidate runs plus slack.
  std::optional<std::string> reply = request(detail::to_json(input).dump(), 2 * options_.run_timeout_seconds + 30,
                                             input.artifact_path, &failure.message);
  if (!reply) return failure;
  return detail::run_result_from_json(kiln::support::parse_json(*reply));
}

std::vector<RunResult> LocalRunner::run_batch_locked(const std::vector<RunInput> &batch) {
  nlohmann::json frame{{"batch", nlohmann::json::array()}};
  for (const RunInput &input : batch) frame["batch"].push_back(detail::to_json(input));
  RunResult failure;
  failure.error = ErrorKind::kRuntimeError;
  // Per candidate: the reference, its own run and its share of the shared timing.
  double timeout = static_cast<double>(batch.size()) * (3 * options_.run_timeout_seconds + 30);
  std::optional<std::string> reply =
      request(frame.dump(), timeout, "a batch of " + std::to_string(batch.size()) + " candidates", &failure.message);
  if (!reply) return std::vector<RunResult>(batch.size(), failure);
  nlohmann::json j = kiln::support::parse_json(*reply);
  std::vector<RunResult> results;
  if (!j.contains("results") || j["results"].size() != batch.size()) {
    // The server refused the batch as a whole: that reason for every candidate.
    return std::vector<RunResult>(batch.size(), detail::run_result_from_json(j));
  }
  for (const nlohmann::json &r : j["results"]) results.push_back(detail::run_result_from_json(r));
  return results;
}

}  // namespace kiln::measure
