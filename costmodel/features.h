// Per-store features of a scheduled program, in the style of Ansor: the program is
// lowered as for code generation, and every buffer store becomes one fixed-length row
// describing its computation, loop annotations, memory accesses, allocation, loop
// scope and arithmetic intensity. A program is the bag of its rows; the cost model
// scores it as the sum of per-row predictions. Every feature is listed, with its
// meaning, in costmodel/README.md.

#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/stmt.h"

namespace kiln::costmodel {

/// What a GPU program's occupancy depends on: the target's limits per streaming
/// multiprocessor, copied from kiln::Target's cuda fields (scheduler::gpu_limits_of;
/// the arch facts live in target/cuda_arch.cc alone). Rows of GPU programs extracted
/// with these get the GPU columns (costmodel/README.md, "GPU programs").
struct GpuLimits {
  int warp_size = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int64_t shared_memory_per_sm_bytes = 0;
  int registers_per_sm = 0;
  int sm_count = 0;
};

/// The names of the columns of a feature row, in order: the CPU layout (every target's
/// first columns), then with `gpu` the GPU program columns. The row length is
/// feature_names(gpu).size().
const std::vector<std::string> &feature_names(bool gpu = false);

/// The column of a named feature; throws std::invalid_argument for an unknown name.
size_t feature_index(std::string_view name);

/// The rows of one program.
struct ProgramFeatures {
  std::vector<float> values;             ///< num_rows() x num_columns, row-major
  size_t num_columns = 0;                ///< feature_names(gpu).size() of the layout extracted
  std::vector<std::string> store_names;  ///< the buffer each row stores to, for diagnostics
  /// Non-empty when the program could not be lowered; it then has no rows, and cost
  /// models give it the lowest possible score.
  std::string error;

  size_t num_rows() const { return store_names.size(); }
  std::span<const float> row(size_t i) const;
  bool ok() const { return error.empty(); }
};

/// Lowers `scheduled` with ir::lower_for_analysis and extracts one row per store; with
/// `gpu`, the rows have the GPU columns too. Never throws: a program that fails to lower
/// comes back with `error` set. Thread-safe (it reads only its arguments).
ProgramFeatures extract_features(const ir::PrimFunc &scheduled, const GpuLimits *gpu = nullptr);

/// Extracts from a program that is already lowered; throws on malformed IR.
ProgramFeatures extract_features_lowered(const ir::PrimFunc &lowered, const GpuLimits *gpu = nullptr);

/// extract_features of every program, on `threads` threads (<= 0: all hardware
/// threads). Results are in input order and do not depend on the thread count.
std::vector<ProgramFeatures> extract_features_batch(const std::vector<ir::PrimFunc> &programs, int threads,
                                                    const GpuLimits *gpu = nullptr);

}  // namespace kiln::costmodel
