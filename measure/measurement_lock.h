// The lock that keeps timing alone on the host: timing holds it exclusively, builds
// hold it shared. It is a pair of flock(2) files, so it works between threads of one
// process (every acquisition opens its own file description) and between processes
// (several tuners on one machine), and a killed holder releases it automatically.
#pragma once

#include <filesystem>

namespace kiln::measure {

/// /tmp/kiln-measure-<uid>.lock: host-wide by default because the cores are a
/// host-wide resource; two tuners timing at once would spoil each other's numbers.
std::filesystem::path default_measurement_lock_path();

class MeasurementLock {
 public:
  /// An empty path gives a lock that never blocks (measurement without coordination).
  explicit MeasurementLock(std::filesystem::path path);

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
};

}  // namespace kiln::measure
