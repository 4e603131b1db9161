// The one place a runner for this host is chosen: the target's backend says which
// (the local CPU runner, or kiln-cuda-measure processes on this host's GPU), and
// whether this host can measure its programs at all. `kiln tune`, `kiln tune-op`,
// `kiln measure` and `kiln runner` all make their runner here.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "measure/cuda_runner.h"
#include "measure/local_runner.h"
#include "measure/runner.h"
#include "target/target.h"

namespace kiln::measure {

/// What each backend's runner is made with: a CPU target takes `cpu`, a CUDA one `cuda`.
struct HostRunnerOptions {
  LocalRunnerOptions cpu;
  CudaRunnerOptions cuda;
  /// The CPU runner's server runs under a wrapper (qemu): code for another
  /// architecture is measured here all the same.
  bool cpu_server_wrapped = false;
};

/// This host cannot measure the target's programs: `why` says what it lacks.
class HostCannotMeasure : public std::invalid_argument {
 public:
  HostCannotMeasure(const Target &target, std::string why)
      : std::invalid_argument("this host cannot measure for target '" + target.str() + "': " + why),
        why(std::move(why)),
        is_gpu(target.backend().is_gpu()) {}
  std::string why;
  bool is_gpu;
};

/// The runner that measures `target`'s programs on this host. Throws HostCannotMeasure
/// before starting anything where this host cannot; `device_name`, when given, receives
/// the GPU's name for a CUDA target.
std::unique_ptr<Runner> make_host_runner(const Target &target, const HostRunnerOptions &options,
                                         std::string *device_name = nullptr);

}  // namespace kiln::measure
