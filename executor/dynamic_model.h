// A compiled model with dynamic dimensions: a folder holding one compiled model per
// bucket (frontend/dynamic_shapes.h) and a manifest (dynamic.json) saying which input
// and output axes follow which dimension. A call takes inputs of their actual shapes,
// runs the smallest bucket that holds them (inputs copied into its padded buffers, the
// dimensions' values passed as inputs) and returns outputs of their actual shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/model.h"
#include "ir/host_tensor.h"

namespace kiln::executor {

inline constexpr int kDynamicModelFormatVersion = 1;

/// A named dimension and its range.
struct DynamicDim {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  /// Calls may run as up to this many buckets, each on its share of the rows along the
  /// dimension (1: one bucket per call). Only for a model of one dynamic dimension whose
  /// rows never meet (frontend::rows_interact): a dynamic batch.
  int max_pieces = 1;
};

/// A part of a call: `rows` of the dimension's values, from `offset`, run by `bucket`.
struct DynamicPiece {
  size_t bucket = 0;
  int64_t offset = 0;
  int64_t rows = 0;
};

/// An axis of an input or output: a fixed extent, or scale × a dimension's value.
struct DynamicAxis {
  int64_t extent = 0;  ///< for a fixed axis
  int dim = -1;        ///< index into the dims; -1: fixed
  int64_t scale = 1;
};

struct DynamicTensor {
  std::string name;
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<DynamicAxis> axes;
};

/// What dynamic.json holds.
struct DynamicManifest {
  std::vector<DynamicDim> dims;
  std::vector<DynamicTensor> inputs;
  std::vector<DynamicTensor> outputs;
  /// Each bucket's dimension values, ascending in the last dimension.
  std::vector<std::vector<int64_t>> buckets;

  /// The folder of bucket `i` inside the model's folder ("seq16", "batch2_seq64").
  std::string bucket_folder(size_t i) const;
  /// The shape of a tensor at the dimensions' values.
  static std::vector<int64_t> shape_at(const DynamicTensor &t, const std::vector<int64_t> &values);
  nlohmann::json to_json() const;
  /// Throws ModelError naming what is wrong.
  static DynamicManifest from_json(const nlohmann::json &j);
};

/// Whether `dir` holds a compiled model with dynamic dimensions (its dynamic.json).
bool is_dynamic_model(const std::string &dir);

class DynamicModel {
 public:
  /// Reads the manifest; buckets are loaded when first run.
  static DynamicModel load(const std::string &dir);
  DynamicModel(DynamicModel &&) noexcept;
  DynamicModel &operator=(DynamicModel &&) noexcept;
  ~DynamicModel();

  const DynamicManifest &manifest() const;
  /// The dimensions' values the inputs' shapes give; ModelError when the inputs are not
  /// of the model's inputs, disagree on a dimension, or a value is outside its range.
  std::vector<int64_t> dim_values(const std::vector<ir::HostTensor> &inputs) const;
  /// ModelError when a value is outside its range (named by the dimension).
  void check_dim_values(const std::vector<int64_t> &values) const;
  /// The bucket a call with these dimension values runs (the smallest that holds them).
  size_t bucket_of(const std::vector<int64_t> &values) const;
  /// The buckets a call with these values runs: bucket_of's alone, or, where the
  /// dimension's calls may be split (DynamicDim::max_pieces), the pieces that pad least
  /// (support::split_into_pieces), largest first.
  std::vector<DynamicPiece> pieces_of(const std::vector<int64_t> &values) const;
  /// The bucket's compiled model (loaded now if not yet).
  Model &bucket(size_t i);

  /// Seeded random inputs of the shapes the values give (token ids within their tables).
  std::vector<ir::HostTensor> random_inputs(const std::vector<int64_t> &values, uint64_t seed = 0);
  /// One inference on inputs of any shapes in the ranges.
  std::vector<ir::HostTensor> run(const std::vector<ir::HostTensor> &inputs);

 private:
  std::vector<ir::HostTensor> run_bucket(size_t b, const std::vector<ir::HostTensor> &inputs,
                                         const std::vector<int64_t> &values);
  struct Impl;
  explicit DynamicModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::executor
