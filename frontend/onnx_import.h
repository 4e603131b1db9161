// ONNX import: a model file in, a Kiln graph (frontend/graph.h) out. Opsets 11-21 of the
// default domain, static shapes, weights inside the file or in external data files
// beside it (what torch.onnx.export writes by default). Every problem a user can cause
// is an ImportError whose message names the node, tensor or input and what to do.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "frontend/graph.h"

namespace kiln::frontend {

struct ImportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ImportOptions {
  /// Fixes the shape of a graph input (`--shape NAME=1x3x224x224`): needed for inputs
  /// with symbolic or unknown dimensions, allowed for any input.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  /// An input's shape with named dimensions (`--shape input_ids=1xseq`): each entry a
  /// number or a name that `dim_values` gives the value of.
  std::map<std::string, std::vector<std::string>> input_dims;
  /// Values of the model's named dimensions (an input's `dim_param`, e.g. `--dim
  /// batch=1`): every input dimension with that name gets it. `input_shapes` wins for
  /// the inputs it names.
  std::map<std::string, int64_t> dim_values;
  /// Files larger than this are refused before they are read.
  int64_t max_file_bytes = int64_t{2} << 30;
  /// The folder that tensors stored as external data name their files in
  /// (import_onnx_file sets the model file's folder); empty: external data is refused.
  std::string external_data_dir;
};

/// The ONNX opsets of the default domain Kiln imports.
inline constexpr int kMinOpset = 11;
inline constexpr int kMaxOpset = 21;
/// The newest ONNX IR version Kiln reads (ONNX 1.16); its new element types (float8,
/// 4-bit integers) are refused by name where a tensor has one.
inline constexpr int64_t kMaxIrVersion = 10;

/// Reads and imports a model file.
Graph import_onnx_file(const std::string &path, const ImportOptions &options = {});
/// Imports a serialized ModelProto; `what` names it in messages.
Graph import_onnx_bytes(const std::string &bytes, const ImportOptions &options = {}, const std::string &what = "model");

}  // namespace kiln::frontend
