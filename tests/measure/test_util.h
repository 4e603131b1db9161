// Helpers shared by the measurement tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "measure/local_runner.h"

namespace kiln::measure::testing {

/// Path of a fixture artifact built from tests/measure/fixtures/<name>.c.
inline std::string fixture(const std::string &name) {
  return std::string(KILN_MEASURE_FIXTURE_DIR) + "/" + name + ".so";
}

/// A fresh directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() / ("kiln-measure-test-" + std::string(info->test_suite_name()) +
                                                      "-" + info->name() + "-" + std::to_string(getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path &path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Runner options for tests: short timeouts and a modest memory limit; a private lock
/// file so that tests do not wait for other Kiln processes on the machine.
inline LocalRunnerOptions test_runner_options(const TempDir &dir) {
  LocalRunnerOptions options;
  options.run_timeout_seconds = 5;
  options.memory_limit_bytes = int64_t{512} << 20;
  options.lock_path = dir.path() / "measure.lock";
  return options;
}

/// "kind: message", for assertion output.
inline std::string describe(const RunResult &r) { return std::string(to_string(r.error)) + ": " + r.message; }

/// Quick timing: a few short repeats.
inline RunInput quick_input(const std::string &artifact, const std::string &reference) {
  RunInput input;
  input.artifact_path = artifact;
  input.reference_artifact_path = reference;
  input.input_seed = 42;
  input.timing.repeat = 2;
  input.timing.min_repeat_ms = 1;
  return input;
}

}  // namespace kiln::measure::testing
