// Splitting a number of independent rows into pieces of given sizes. A model whose calls'
// rows never meet (a dynamic batch: each sample computed on its own) runs a call of 600
// rows as pieces of 512 and 128 instead of one of 1024 — less padding than any single
// size, for a few sizes compiled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace kiln::support {

/// At most `max_pieces` sizes from `sizes` (positive) that together hold at least `n`
/// rows, with the fewest rows in all (the least padding), then the fewest pieces;
/// largest first. Empty when none holds n. Every piece but the last is filled.
inline std::vector<int64_t> split_into_pieces(int64_t n, std::vector<int64_t> sizes, int max_pieces) {
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<int64_t> best, current;
  int64_t best_rows = 0;
  // Non-increasing sequences only, each piece needed: a piece is added while the rows
  // held are short of n.
  std::function<void(size_t, int64_t)> extend = [&](size_t from, int64_t held) {
    if (held >= n) {
      if (best.empty() || held < best_rows || (held == best_rows && current.size() < best.size()))
        best = current, best_rows = held;
      return;
    }
    if (static_cast<int>(current.size()) == max_pieces) return;
    for (size_t i = from; i < sizes.size(); ++i) {
      if (sizes[i] <= 0) continue;
      current.push_back(sizes[i]);
      extend(i, held + sizes[i]);
      current.pop_back();
    }
  };
  if (n > 0) extend(0, 0);
  return best;
}

}  // namespace kiln::support
