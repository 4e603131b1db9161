#include "measure/measurement_lock.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace kiln::measure {

std::filesystem::path default_measurement_lock_path() {
  return std::filesystem::temp_directory_path() / ("kiln-measure-" + std::to_string(getuid()) + ".lock");
}

MeasurementLock::MeasurementLock(std::filesystem::path path) : path_(std::move(path)) {}

static int open_lock_file(const std::filesystem::path &path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    throw std::runtime_error("cannot open the measurement lock file " + path.string() + ": " + std::strerror(errno));
  }
  return fd;
}

static void lock_file(int fd, int operation, const std::filesystem::path &path) {
  while (flock(fd, operation) != 0) {
    if (errno == EINTR) continue;
    int error = errno;
    close(fd);
    throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(error));
  }
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
  lock_file(gate, LOCK_EX, gate_path);
  int fd = -1;
  try {
    fd = open_lock_file(path_);
    lock_file(fd, operation, path_);
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
