// A compiled model: a folder with one artifact per fused subgraph, the weights, and a
// manifest (model.json) saying which buffers each artifact reads and writes. Loading
// and running it needs no compiler: CPU artifacts are loaded with dlopen and call the
// runtime's thread pool; a model compiled for a cuda target ("device": "cuda") runs its
// steps' kernels on the GPU through the driver API (gpu_steps.h), its inputs and
// outputs in host memory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/host_tensor.h"
#include "ir/tensor_type.h"

namespace kiln::executor {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// 2: activations live at planned offsets of one arena (format 1 had a buffer each).
/// 3: each step names its artifact's SHA-256, checked before the artifact is loaded, and
/// the manifest records the pipeline options the model was prepared with.
inline constexpr int kModelFormatVersion = 3;

/// One step of a compiled model (a fused subgraph), as `kiln compile` described it.
struct StepInfo {
  std::string workload;  ///< the subgraph's summary, e.g. "conv2d+add+relu [1,64,56,56] ..."
  std::string key_hash;  ///< its workload key's hash: what the database looks up
  bool tuned = false;    ///< built from a database record (else the untuned default)
  /// The record's latency in ms as the tuner measured the kernel alone (its confirmed
  /// median when there is one); absent for untuned steps and older compiled models.
  std::optional<double> tuned_ms;
};

/// A loaded model. The weights and one arena for every activation (inputs,
/// intermediates, outputs; placed by the compile-time memory plan) are allocated once
/// at load: an inference allocates nothing.
class Model {
 public:
  static Model load(const std::string &dir);
  Model(Model &&) noexcept;
  Model &operator=(Model &&) noexcept;
  ~Model();

  /// The graph inputs and outputs: names and types, in model order.
  const std::vector<std::string> &input_names() const;
  const std::vector<ir::TensorType> &input_types() const;
  const std::vector<std::string> &output_names() const;
  const std::vector<ir::TensorType> &output_types() const;
  /// The target the artifacts were built for.
  const std::string &target() const;
  size_t num_steps() const;
  const std::vector<StepInfo> &steps() const;
  /// Bytes of the activation arena, and what one buffer per activation would take.
  int64_t arena_bytes() const;
  int64_t unplanned_bytes() const;
  /// The GPU a model compiled for a cuda target runs on (its name); "" for CPU models.
  std::string gpu_name() const;

  /// Inputs of the model's types filled with seeded random values: the same for the
  /// same seed, for timing runs (kiln bench, kiln tune, choosing programs in the model).
  std::vector<ir::HostTensor> random_inputs(uint64_t seed = 0) const;

  /// Threads of the runtime's pool for parallel loops (process-wide).
  static void set_threads(int threads);

  /// Runs one inference; inputs are checked against input_types(), and inputs that are
  /// row indices (token ids) against their table's rows.
  std::vector<ir::HostTensor> run(const std::vector<ir::HostTensor> &inputs);

  /// Zero-copy use: write the inputs where input_data() points, run(), then read the
  /// outputs where output_data() points (valid until the next run; an output may share
  /// no bytes with an input, but the next run overwrites it).
  void *input_data(size_t i);
  const void *output_data(size_t i) const;
  void run();

  /// Replaces step `i`'s artifact with another build of the same subgraph (another
  /// program of its task): loads it and packs its weights, then closes the previous one.
  /// On an error the step keeps its artifact. The manifest on disk is not changed.
  void replace_step(size_t i, const std::string &artifact);

  /// Runs `runs` inferences on `inputs` (copied in before each, untimed: the arena may
  /// reuse a dead input's bytes), timing each step on its own inside them; returns
  /// every step's median in ms, in step order. Where a model is slower than the sum of
  /// its tuned kernels, this says which steps lose the time.
  std::vector<double> profile_steps(const std::vector<ir::HostTensor> &inputs, int runs);
  /// Copies the inputs into the model's input buffers (ModelError on a count, shape or
  /// type mismatch).
  void set_inputs(const std::vector<ir::HostTensor> &inputs);

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  /// Throws ModelError naming an input of row indices that holds one outside its table.
  void check_index_inputs() const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::executor
