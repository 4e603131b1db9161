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

/// The names of the columns of a feature row, in order. The row length is
/// feature_names().size().
const std::vector<std::string> &feature_names();

/// The column of a named feature; throws std::invalid_argument for an unknown name.
size_t feature_index(std::string_view name);

/// The rows of one program.
struct ProgramFeatures {
  std::vector<float> values;             ///< num_rows() x feature_names().size(), row-major
  std::vector<std::string> store_names;  ///< the buffer each row stores to, for diagnostics
  /// Non-empty when the program could not be lowered; it then has no rows, and cost
  /// models give it the lowest possible score.
  std::string error;

  size_t num_rows() const { return store_names.size(); }
  std::span<const float> row(size_t i) const;
  bool ok() const { return error.empty(); }
};

/// Lowers `scheduled` with ir::lower_for_analysis and extracts one row per store.
/// Never throws: a program that fails to lower comes back with `error` set.
/// Thread-safe (it reads only its argument).
ProgramFeatures extract_features(const ir::PrimFunc &scheduled);

/// Extracts from a program that is already lowered; throws on malformed IR.
ProgramFeatures extract_features_lowered(const ir::PrimFunc &lowered);

/// extract_features of every program, on `threads` threads (<= 0: all hardware
/// threads). Results are in input order and do not depend on the thread count.
std::vector<ProgramFeatures> extract_features_batch(const std::vector<ir::PrimFunc> &programs, int threads);

}  // namespace kiln::costmodel
