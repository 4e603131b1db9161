#include "measure/measurement_lock.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace kiln::measure {

namespace {

// A directory only this user can use: ours, not a link, no access for others.
bool private_directory(const std::filesystem::path &dir, bool create) {
  if (create) mkdir(dir.c_str(), 0700);
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return false;
  if ((st.st_mode & 077) != 0 && chmod(dir.c_str(), 0700) != 0) return false;
  return true;
}

int open_lock_file(const std::filesystem::path &path) {
  // O_NOFOLLOW: a link planted at the lock's path must not redirect us.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int error = errno;
    throw std::runtime_error("cannot open the measurement lock file " + path.string() + ": " +
                             (error == ELOOP ? std::string("it is a symbolic link; remove it") : std::strerror(error)));
  }
  return fd;
}

// "pid 123 (kiln tune-op ...)" for every process holding a flock on the file, from
// /proc/locks; empty when it cannot tell.
std::string lock_holders(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return "";
  std::ifstream locks("/proc/locks");
  std::string line, holders;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string number, kind, advisory, mode, device;
    long pid = 0;
    if (!(fields >> number >> kind)) continue;
    if (kind == "->") fields >> kind;  // a blocked waiter's line
    if (!(fields >> advisory >> mode >> pid >> device) || kind != "FLOCK") continue;
    size_t colon = device.rfind(':');
    if (colon == std::string::npos || std::stoull(device.substr(colon + 1)) != st.st_ino) continue;
    if (line.find("->") != std::string::npos || pid == getpid()) continue;
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::string command, word;
    while (std::getline(cmdline, word, '\0') && command.size() < 80) command += (command.empty() ? "" : " ") + word;
    holders +=
        (holders.empty() ? "" : ", ") + ("pid " + std::to_string(pid)) + (command.empty() ? "" : " (" + command + ")");
  }
  return holders;
}

void lock_file(int fd, int operation, const std::filesystem::path &path, double wait_limit_seconds) {
  auto start = std::chrono::steady_clock::now();
  bool announced = false;
  auto pause = std::chrono::milliseconds(1);
  while (flock(fd, operation | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      int error = errno;
      close(fd);
      throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(error));
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > wait_limit_seconds) {
      std::string holders = lock_holders(fd);
      close(fd);
      throw std::runtime_error("waited " + std::to_string(static_cast<int>(waited)) + " s for the measurement lock " +
                               path.string() + (holders.empty() ? "" : ", held by " + holders) +
                               "; stop that process or measure without coordination (an empty lock path)");
    }
    if (!announced && waited > 5) {
      std::string holders = lock_holders(fd);
      std::fprintf(stderr, "kiln: waiting for the measurement lock %s%s%s\n", path.c_str(),
                   holders.empty() ? "" : ", held by ", holders.c_str());
      announced = true;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

}  // namespace

std::filesystem::path default_measurement_lock_path() {
  if (const char *runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && *runtime) {
    std::filesystem::path base = runtime;
    if (private_directory(base, false) && private_directory(base / "kiln", true)) return base / "kiln" / "measure.lock";
  }
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln-" + std::to_string(getuid()));
  if (!private_directory(dir, true)) {
    // Someone else made it first. Still usable, and a lock held there from outside
    // ends in the wait limit's error naming the holder, not in a silent hang.
    std::fprintf(stderr,
                 "kiln: warning: %s is not a private directory of this user; remove it, or set "
                 "XDG_RUNTIME_DIR to a directory only you can write\n",
                 dir.c_str());
  }
  return dir / "measure.lock";
}

MeasurementLock::MeasurementLock(std::filesystem::path path, double wait_limit_seconds)
    : path_(std::move(path)), wait_limit_seconds_(wait_limit_seconds) {
  // A lock path that cannot be opened (a directory, a missing folder) is found now, not
  // at the first timing, where it would fail a candidate that did nothing wrong.
  if (path_.empty()) return;
  std::filesystem::path gate_path = path_;
  gate_path += ".gate";
  for (const auto &file : {path_, gate_path}) close(open_lock_file(file));
}

// flock alone lets new shared holders overtake a waiting exclusive one, so a stream of
// builds could starve timing forever. Every acquirer therefore passes a turnstile (a
// second file, held exclusively only while queueing for the main lock): a waiting
// timer keeps the turnstile, so later builders queue behind it.
MeasurementLock::Guard MeasurementLock::acquire(int operation) const {
  if (path_.empty()) return Guard();
  std::filesystem::path gate_path = path_;
  gate_path += ".gate";
  int gate = open_lock_file(gate_path);
  lock_file(gate, LOCK_EX, gate_path, wait_limit_seconds_);
  int fd = -1;
  try {
    fd = open_lock_file(path_);
    lock_file(fd, operation, path_, wait_limit_seconds_);
  } catch (...) {
    flock(gate, LOCK_UN);
    close(gate);
    throw;
  }
  flock(gate, LOCK_UN);
  close(gate);
  return Guard(fd);
}

MeasurementLock::Guard MeasurementLock::exclusive() const { return acquire(LOCK_EX); }
MeasurementLock::Guard MeasurementLock::shared() const { return acquire(LOCK_SH); }

MeasurementLock::Guard::Guard(Guard &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

MeasurementLock::Guard &MeasurementLock::Guard::operator=(Guard &&other) noexcept {
  if (this != &other) {
    Guard dropped(std::move(*this));
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

// Unlock explicitly before closing: a child forked while we held the lock may still
// have a copy of this descriptor, and LOCK_UN releases the lock for every copy.
MeasurementLock::Guard::~Guard() {
  if (fd_ < 0) return;
  flock(fd_, LOCK_UN);
  close(fd_);
}

}  // namespace kiln::measure
