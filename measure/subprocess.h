// Child-process plumbing shared by the builder pool and the runner: message frames over
// sockets, waiting with a deadline, and readable descriptions of how a child ended.
// Internal to measure/.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "support/format_bytes.h"

namespace kiln::measure::detail {

using Clock = std::chrono::steady_clock;

/// Sends one frame: an 8-byte length, then the bytes. False if the peer is gone.
bool write_frame(int fd, std::string_view payload);

enum class ReadStatus { kOk, kEof, kTimeout, kError };
/// Reads one frame, giving up at `deadline` (Clock::time_point::max(): wait forever).
ReadStatus read_frame(int fd, std::string &payload, Clock::time_point deadline);

/// In a freshly forked child: keeps fd `keep` (moved to descriptor 3, returned) and
/// closes every other descriptor above 2, so the child holds no copies of the parent's
/// files, sockets or lock descriptors.
int keep_only_fd(int keep);

/// How a child ended.
struct ChildExit {
  bool timed_out = false;  // we killed it at the deadline
  bool exited = false;     // exit()/_exit() rather than a signal
  int exit_code = 0;
  int signal = 0;
  double seconds = 0;         // fork to reaping
  int64_t max_rss_bytes = 0;  // peak resident memory
};

/// A child that runs `body(socket)` and then _exit(0)s, after `setup` (limits etc.).
/// The parent collects every frame the child sends until it closes the socket or the
/// deadline passes (then the child is killed with SIGKILL).
struct ChildRun {
  std::vector<std::string> frames;
  ChildExit exit;
};
ChildRun run_in_child(const std::function<void(int socket)> &body, double timeout_seconds);

/// How a run_in_child body that threw ends: out of memory (std::bad_alloc, e.g. its
/// buffers under the memory limit), or any other exception.
constexpr int kChildOutOfMemory = 122;
constexpr int kChildFailed = 121;
/// How a candidate stopped by the sandbox's system-call filter exits (SandboxReport::
/// syscalls_filtered): it made a system call no kernel needs.
constexpr int kChildSyscallRefused = 123;

/// "SIGSEGV", "SIGKILL", ... or "signal 42".
std::string signal_name(int signal);
/// "0.02 s", "1.3 s", "12 s".
std::string format_seconds(double seconds);
using support::format_bytes;  // "512 MiB", "3.5 GiB"

/// Caps this process's address space (RLIMIT_AS, which also covers mmap'd memory) at
/// what it maps now plus `extra_bytes`: the limit then means the same in every process.
void limit_address_space(int64_t extra_bytes);

}  // namespace kiln::measure::detail
