#include "measure/subprocess.h"

#include <new>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace kiln::measure::detail {

static bool send_all(int fd, const char *data, size_t size) {
  while (size > 0) {
    // MSG_NOSIGNAL: a vanished peer is an error to report, not a SIGPIPE to die of.
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_frame(int fd, std::string_view payload) {
  uint64_t size = payload.size();
  char header[sizeof size];
  std::memcpy(header, &size, sizeof size);
  return send_all(fd, header, sizeof header) && send_all(fd, payload.data(), payload.size());
}

// Reads exactly `size` bytes; eof only when nothing at all was read.
static ReadStatus read_exact(int fd, char *data, size_t size, Clock::time_point deadline) {
  size_t done = 0;
  while (done < size) {
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return ReadStatus::kTimeout;
      timeout_ms = static_cast<int>(std::min<int64_t>(left + 1, std::numeric_limits<int>::max()));
    }
    pollfd pfd{fd, POLLIN, 0};
    int ready = poll(&pfd, 1, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::kError;
    }
    if (ready == 0) continue;  // re-check the deadline
    ssize_t n = read(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return done == 0 ? ReadStatus::kEof : ReadStatus::kError;
    }
    if (n == 0) return done == 0 ? ReadStatus::kEof : ReadStatus::kError;
    done += static_cast<size_t>(n);
  }
  return ReadStatus::kOk;
}

ReadStatus read_frame(int fd, std::string &payload, Clock::time_point deadline) {
  uint64_t size = 0;
  char header[sizeof size];
  ReadStatus status = read_exact(fd, header, sizeof header, deadline);
  if (status != ReadStatus::kOk) return status;
  std::memcpy(&size, header, sizeof size);
  if (size > (uint64_t{1} << 40)) return ReadStatus::kError;  // garbage, not a frame
  payload.resize(size);
  status = read_exact(fd, payload.data(), size, deadline);
  return status == ReadStatus::kEof ? ReadStatus::kError : status;
}

int keep_only_fd(int keep) {
  constexpr int kTarget = 3;
  if (keep != kTarget) {
    if (dup2(keep, kTarget) < 0) _exit(120);
    close(keep);
  }
  // close_range is one syscall even when the parent had thousands of descriptors.
  if (close_range(kTarget + 1, ~0U, 0) != 0) {
    for (int fd = kTarget + 1; fd < 65536; ++fd) close(fd);
  }
  return kTarget;
}

static double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ChildRun run_in_child(const std::function<void(int socket)> &body, double timeout_seconds) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    throw std::runtime_error(std::string("socketpair failed: ") + std::strerror(errno));
  }
  Clock::time_point start = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    close(sockets[0]);
    close(sockets[1]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(error));
  }
  if (pid == 0) {
    close(sockets[0]);
    // If whoever forked us dies, so do we: an orphaned candidate must not keep spinning.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = keep_only_fd(sockets[1]);
    // Never unwind into the parent's code in the child.
    try {
      body(fd);
    } catch (const std::bad_alloc &) {
      _exit(kChildOutOfMemory);
    } catch (...) {
      _exit(kChildFailed);
    }
    _exit(0);
  }
  close(sockets[1]);
  int fd = sockets[0];

  ChildRun run;
  Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds));
  for (;;) {
    std::string frame;
    ReadStatus status = read_frame(fd, frame, deadline);
    if (status == ReadStatus::kOk) {
      run.frames.push_back(std::move(frame));
      continue;
    }
    if (status == ReadStatus::kTimeout) {
      kill(pid, SIGKILL);
      run.exit.timed_out = true;
    }
    break;
  }
  close(fd);

  // The socket closes when the child exits; give a child that closed it early but
  // keeps running until the deadline, then kill it.
  int status = 0;
  rusage usage{};
  for (;;) {
    pid_t done = wait4(pid, &status, run.exit.timed_out ? 0 : WNOHANG, &usage);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    if (done == 0) {
      if (Clock::now() >= deadline) {
        kill(pid, SIGKILL);
        run.exit.timed_out = true;
      } else {
        usleep(1000);
      }
    }
  }
  run.exit.seconds = seconds_since(start);
  run.exit.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  if (WIFEXITED(status)) {
    run.exit.exited = true;
    run.exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    run.exit.signal = WTERMSIG(status);
  }
  return run;
}

std::string signal_name(int signal) {
  const char *abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return "signal " + std::to_string(signal);
  return std::string("SIG") + abbrev;
}

std::string format_seconds(double seconds) {
  char text[32];
  if (seconds < 10) {
    std::snprintf(text, sizeof text, "%.2g s", seconds);
  } else {
    std::snprintf(text, sizeof text, "%.0f s", seconds);
  }
  return text;
}

}  // namespace kiln::measure::detail
