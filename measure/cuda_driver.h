// Running CUDA artifacts through the driver API, loaded with dlopen: one binary runs on
// hosts without a GPU (and says so) and needs no CUDA toolkit on a board, only its
// driver. A kernel fault leaves the CUDA context unusable, so measurements run in a
// process of their own (kiln-cuda-measure) that is started afresh after one.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "measure/cuda_artifact.h"

namespace kiln::measure {

/// A driver call failed: the message names the call and the driver's error
/// (CUDA_ERROR_ILLEGAL_ADDRESS ...). `fault` is true for errors after which the context
/// cannot be used again (the process must end).
struct CudaError : std::runtime_error {
  CudaError(const std::string &what, bool fault) : std::runtime_error(what), fault(fault) {}
  bool fault;
};

struct CudaTimingOptions {
  /// Timed repeats; each is `number` back-to-back runs of all launches between events.
  int repeats = 10;
  /// Runs per repeat; 0: grown until a repeat lasts min_repeat_ms.
  int64_t number = 0;
  double min_repeat_ms = 10;
  /// Writes a buffer twice the L2's size before each repeat when the program's buffers
  /// fit in the L2, so repeats do not start with them cached.
  bool flush_l2 = true;
};

struct CudaMeasurement {
  /// Seconds per run of the program, one per repeat.
  std::vector<double> seconds;
  int64_t number = 1;
  /// The output buffers' bytes after the runs, in the artifact's order.
  std::vector<std::vector<uint8_t>> outputs;
  /// "cubin" or "ptx": what the driver loaded.
  std::string loaded;
  double median_seconds() const;
};

class CudaDriver {
 public:
  /// Loads libcuda.so.1 and makes device `ordinal`'s primary context current; nullptr
  /// with the reason in `why` where there is no driver or no such device.
  static std::unique_ptr<CudaDriver> open(int ordinal, std::string *why);
  ~CudaDriver();
  CudaDriver(const CudaDriver &) = delete;
  CudaDriver &operator=(const CudaDriver &) = delete;

  const std::string &device_name() const { return device_name_; }
  /// "sm_90" for compute capability 9.0.
  const std::string &arch() const { return arch_; }
  int64_t l2_bytes() const { return l2_bytes_; }

  /// Loads the artifact's PTX (the driver JIT-compiles it for the device), allocates
  /// its buffers, copies `inputs` (the bytes of each input buffer, in order) in, runs
  /// the launches once to warm up and then as `timing` says, and copies the outputs
  /// back. Throws CudaError; std::invalid_argument for inputs that do not fit.
  CudaMeasurement measure(const CudaArtifact &artifact, const std::vector<std::vector<uint8_t>> &inputs,
                          const CudaTimingOptions &timing);

 private:
  struct Api;
  CudaDriver() = default;
  std::unique_ptr<Api> api_;
  void *context_ = nullptr;
  int device_ = 0;
  std::string device_name_, arch_;
  int64_t l2_bytes_ = 0;
};

}  // namespace kiln::measure
