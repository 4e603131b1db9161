// Winograd F(m x m, 3 x 3) for m = 2 and m = 4: the matrices of Lavin & Gray's minimal
// filtering algorithms, shared by the transform operators (ops/winograd.cc) and the
// frontend's weight transform (frontend/passes.h, rewrite_winograd_convolutions).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::ops {

struct WinogradMatrices {
  int64_t output_tile = 2;  ///< m: outputs per tile and axis
  int64_t input_tile = 4;   ///< m + 2: the input tile and the number of products per axis
  /// Bt [input_tile x input_tile]: V = Bt d B for an input tile d.
  std::vector<std::vector<double>> bt;
  /// G [input_tile x 3]: U = G g Gt for a 3x3 filter g.
  std::vector<std::vector<double>> g;
  /// At [output_tile x input_tile]: Y = At M A for the tile's products M.
  std::vector<std::vector<double>> at;
};

/// The matrices of F(m x m, 3 x 3); nullptr unless m is 2 or 4.
const WinogradMatrices *winograd_matrices(int64_t output_tile);

}  // namespace kiln::ops
