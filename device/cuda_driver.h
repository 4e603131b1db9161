// Running CUDA artifacts through the driver API, loaded with dlopen: one binary runs on
// hosts without a GPU (and says so) and needs no CUDA toolkit on a board, only its
// driver. A kernel fault leaves the CUDA context unusable, so measurements run in a
// process of their own (kiln-cuda-measure) that is started afresh after one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/cuda_artifact.h"

namespace kiln::device {

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
  struct Api;

 public:
  /// Device memory, freed when destroyed; the driver must outlive it.
  class Memory {
   public:
    Memory() = default;
    Memory(Memory &&other) noexcept;
    Memory &operator=(Memory &&other) noexcept;
    ~Memory();
    uint64_t address() const { return address_; }
    int64_t bytes() const { return bytes_; }

   private:
    friend class CudaDriver;
    const Api *api_ = nullptr;
    uint64_t address_ = 0;
    int64_t bytes_ = 0;
  };

  /// An artifact's module, loaded, with one function per launch; unloaded when
  /// destroyed. The driver must outlive it.
  class Program {
   public:
    Program(Program &&other) noexcept;
    Program &operator=(Program &&other) noexcept;
    ~Program();
    /// "cubin" or "ptx": what the driver loaded.
    const std::string &loaded() const { return loaded_; }
    const std::vector<CudaArtifactLaunch> &launches() const { return launches_; }

   private:
    friend class CudaDriver;
    Program() = default;
    const Api *api_ = nullptr;
    void *module_ = nullptr;
    std::string name_, loaded_;
    std::vector<CudaArtifactLaunch> launches_;
    std::vector<void *> functions_;
  };

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

  /// Loads the artifact's cubin where it is for this device's arch and the driver takes
  /// it (a driver older than the toolkit that made it does not), else its PTX, which the
  /// driver JIT-compiles (its error log in the CudaError when it cannot); opts launches
  /// above 48 KiB into more shared memory.
  Program load(const CudaArtifact &artifact);
  /// `bytes` of device memory (at least 1); CudaError names `what` when there is none.
  Memory allocate(int64_t bytes, const std::string &what);
  void copy_to_device(uint64_t address, const void *data, size_t bytes, const std::string &what);
  void copy_to_host(void *data, uint64_t address, size_t bytes, const std::string &what);
  /// Launches the program's kernels in order on the default stream, each taking every
  /// buffer of `buffers` (device addresses, in the artifact's buffer order).
  void launch(const Program &program, const std::vector<uint64_t> &buffers);
  /// Waits for everything launched; a CudaError names `what`.
  void synchronize(const std::string &what);
  /// Milliseconds the work `enqueue` launches takes on the GPU (CUDA events around it).
  double time_ms(const std::function<void()> &enqueue, const std::string &what);

  /// Loads the artifact (load()), allocates its buffers, copies `inputs` (the bytes of
  /// each input buffer, in order) in, runs the launches once to warm up and then as
  /// `timing` says, and copies the outputs back. Throws CudaError; std::invalid_argument
  /// for inputs that do not fit.
  CudaMeasurement measure(const CudaArtifact &artifact, const std::vector<std::vector<uint8_t>> &inputs,
                          const CudaTimingOptions &timing);

 private:
  CudaDriver() = default;
  std::unique_ptr<Api> api_;
  void *context_ = nullptr;
  int device_ = 0;
  std::string device_name_, arch_;
  int64_t l2_bytes_ = 0;
};

}  // namespace kiln::device
