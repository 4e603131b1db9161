// bfloat16 <-> float32, header-only: the interpreter's host tensors and the measurement
// server's inputs (which links no IR library) convert the same way.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln::support {

/// bfloat16's bits as float32: the upper half of the float's bits.
inline float bfloat16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// float32 to bfloat16, rounded to nearest even; NaN stays NaN (quiet), infinities stay
/// infinities, and values past bfloat16's largest finite one round to infinity.
inline uint16_t float_to_bfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // NaN, quieted
  bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kiln::support
