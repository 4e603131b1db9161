// A compiled model's steps on a GPU (a model compiled for a cuda target): the weights
// uploaded once, one device arena at the compile-time plan's offsets, each step's
// kernels launched in order on one stream. The host side (model.cc) keeps the inputs
// and outputs in host memory and copies them across around each inference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/tensor_type.h"

namespace kiln::executor {

/// What the GPU side needs of one of the model's buffers.
struct GpuBufferSpec {
  ir::TensorType type;
  int64_t bytes = 0;
  /// A weight: its bytes on the host, uploaded once. Else an activation at
  /// `arena_offset` (or no storage: -1).
  const void *constant = nullptr;
  int64_t arena_offset = -1;
};

/// One step: its artifact's path (NAME.cuda.json, already checked against its digest)
/// and the buffers it takes (the subgraph's inputs, then its output).
struct GpuStepSpec {
  std::string artifact;
  std::vector<size_t> buffer_ids;
};

class GpuSteps {
 public:
  /// Opens GPU `ordinal` ($KILN_CUDA_DEVICE, else 0), refuses a GPU of another arch than
  /// `arch` ("sm_90": the artifacts' PTX targets it), uploads the weights, allocates the
  /// arena and each step's scratch, and loads every step's kernels. Throws ModelError
  /// saying why (no driver, no GPU, another arch, an artifact that does not match its
  /// step, a CUDA error).
  GpuSteps(const std::string &arch, int64_t arena_bytes, const std::vector<GpuBufferSpec> &buffers,
           const std::vector<GpuStepSpec> &steps);
  ~GpuSteps();
  GpuSteps(const GpuSteps &) = delete;
  GpuSteps &operator=(const GpuSteps &) = delete;

  /// The GPU's name, e.g. "NVIDIA H100 80GB HBM3".
  const std::string &device_name() const;
  /// Copies an activation's bytes from the host to its place in the arena, or back.
  void upload(size_t buffer, const void *data);
  void download(size_t buffer, void *data);
  /// Launches every step in order and waits for them.
  void run();
  /// Launches every step in order, timing each with CUDA events; milliseconds per step.
  std::vector<double> time_steps();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::executor
