// Deterministic byte mutations for the fuzz targets' gtest drivers: every CI run
// fuzzes a bounded amount without libFuzzer.
#pragma once

#include <algorithm>
#include <random>
#include <string>

namespace kiln::testing {

/// One mutation of `bytes`: flipped bytes, a truncation, a run copied over another
/// place (lengths and tags land in odd spots), or a byte set to a varint extreme.
inline std::string mutate(std::string bytes, std::mt19937_64 &rng) {
  if (bytes.empty()) return bytes;
  auto at = [&] { return static_cast<size_t>(rng() % bytes.size()); };
  switch (rng() % 4) {
    case 0:
      for (int k = 0; k < 1 + static_cast<int>(rng() % 8); ++k) bytes[at()] = static_cast<char>(rng());
      break;
    case 1:
      bytes.resize(at());
      break;
    case 2: {
      size_t from = at(), to = at(), n = std::min<size_t>(1 + rng() % 64, bytes.size() - std::max(from, to));
      bytes.replace(to, n, bytes.substr(from, n));
      break;
    }
    default:
      bytes[at()] = static_cast<char>(rng() % 2 ? 0xff : 0x7f);
  }
  return bytes;
}

}  // namespace kiln::testing
