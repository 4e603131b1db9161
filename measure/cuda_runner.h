// The runner for cuda targets on this host: each run is a kiln-cuda-measure process
// (cuda_driver.h), so that a kernel fault, which leaves the CUDA context unusable, or a
// kernel that never ends (killed at the deadline) costs that run alone. The candidate
// and its reference run on the same seeded inputs and their outputs are compared.
#pragma once

#include <map>
#include <string>

#include "measure/runner.h"
#include "target/target.h"

namespace kiln::measure {

struct CudaRunnerOptions {
  /// kiln-cuda-measure to run; empty: default_cuda_measure_command().
  std::string measure_command;
  /// Where inputs and outputs are saved while a batch runs; empty: a fresh directory
  /// under the system's temporary directory, removed with the runner.
  std::string work_dir;
  int device = 0;
  double run_timeout_seconds = 60;
};

/// $KILN_CUDA_MEASURE, else kiln-cuda-measure beside the running executable, else the
/// one this build made.
std::string default_cuda_measure_command();

class CudaRunner : public Runner {
 public:
  explicit CudaRunner(CudaRunnerOptions options);
  ~CudaRunner() override;
  std::vector<RunResult> run(const std::vector<RunInput> &batch) override;
  /// Kernels are timed by the GPU's events: builds may run beside them.
  bool timing_shares_host_cores() const override { return false; }
  RunResult run_one(const RunInput &input);

  /// The GPU kiln-cuda-measure sees ({"device", "arch", ...}); throws
  /// std::runtime_error saying why there is none.
  std::string probe() const;
  /// Why this host cannot measure for `target` ("" when it can): no GPU, or one of
  /// another arch (its timings would be recorded under the wrong device). Sets
  /// `device_name` to the GPU's name when there is one.
  std::string why_not(const Target &target, std::string *device_name = nullptr) const;

 private:
  CudaRunnerOptions options_;
  bool owns_work_dir_ = false;
  int next_run_ = 0;
  /// Saved outputs of reference runs, by (reference artifact, seed).
  std::map<std::pair<std::string, uint64_t>, std::string> reference_dirs_;
};

}  // namespace kiln::measure
