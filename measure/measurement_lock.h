// The lock that keeps timing alone on the host: timing holds it exclusively, builds
// hold it shared. It is a pair of flock(2) files, so it works between threads of one
// process (every acquisition opens its own file description) and between processes
// (several tuners on one machine), and a killed holder releases it automatically.
#pragma once

#include <filesystem>

namespace kiln::measure {

/// measure.lock in this user's private Kiln directory: $XDG_RUNTIME_DIR/kiln when the
/// session has one, else /tmp/kiln-<uid> (created mode 0700; refused when it is a link
/// or another user's). Shared by every Kiln process of the user, because the cores are
/// a host-wide resource and two tuners timing at once would spoil each other's numbers;
/// private to the user, so that nobody else can hold it and stall them.
std::filesystem::path default_measurement_lock_path();

class MeasurementLock {
 public:
  /// An empty path gives a lock that never blocks (measurement without coordination).
  /// A wait longer than `wait_limit_seconds` ends with an error naming the holders;
  /// after a few seconds of waiting a line on stderr says who holds it.
  explicit MeasurementLock(std::filesystem::path path, double wait_limit_seconds = 900);

  /// Holds the lock until destroyed.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard &&other) noexcept;
    Guard &operator=(Guard &&other) noexcept;
    ~Guard();
    bool held() const { return fd_ >= 0; }

   private:
    friend class MeasurementLock;
    explicit Guard(int fd) : fd_(fd) {}
    int fd_ = -1;
  };

  /// For timing: waits until no build and no other timing holds the lock.
  Guard exclusive() const;
  /// For building: many builds share it; waits while a timing holds it.
  Guard shared() const;

  const std::filesystem::path &path() const { return path_; }

 private:
  Guard acquire(int operation) const;
  std::filesystem::path path_;
  double wait_limit_seconds_;
};

}  // namespace kiln::measure
