#include "ir/host_tensor.h"

#include <cstring>

#include <cmath>
#include <limits>

namespace kiln::ir {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_ = 1;
  for (int64_t d : shape_) size_ *= d;
  bytes_.assign(static_cast<size_t>(size_) * dtype_bytes(dtype_), 0);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  if (exp >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

double HostTensor::get(int64_t i) const {
  const uint8_t *p = bytes_.data();
  switch (dtype_) {
    case DType::kBool:
      return p[i] ? 1.0 : 0.0;
    case DType::kInt8:
      return static_cast<double>(reinterpret_cast<const int8_t *>(p)[i]);
    case DType::kInt32:
      return static_cast<double>(reinterpret_cast<const int32_t *>(p)[i]);
    case DType::kInt64:
      return static_cast<double>(reinterpret_cast<const int64_t *>(p)[i]);
    case DType::kFloat16:
      return half_to_float(reinterpret_cast<const uint16_t *>(p)[i]);
    case DType::kFloat32:
      return reinterpret_cast<const float *>(p)[i];
    case DType::kBFloat16:
      return bfloat16_to_float(reinterpret_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}

void HostTensor::set(int64_t i, double v) {
  uint8_t *p = bytes_.data();
  switch (dtype_) {
    case DType::kBool:
      p[i] = v != 0;
      break;
    case DType::kInt8:
      reinterpret_cast<int8_t *>(p)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      break;
    case DType::kInt32:
      reinterpret_cast<int32_t *>(p)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case DType::kInt64:
      reinterpret_cast<int64_t *>(p)[i] = static_cast<int64_t>(v);
      break;
    case DType::kFloat16:
      reinterpret_cast<uint16_t *>(p)[i] = float_to_half(static_cast<float>(v));
      break;
    case DType::kFloat32:
      reinterpret_cast<float *>(p)[i] = static_cast<float>(v);
      break;
    case DType::kBFloat16:
      reinterpret_cast<uint16_t *>(p)[i] = float_to_bfloat16(static_cast<float>(v));
      break;
  }
}

void HostTensor::fill_random(std::mt19937_64 &rng, double lo, double hi) {
  if (is_float(dtype_)) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < size_; ++i) set(i, dist(rng));
  } else {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(std::floor(lo)),
                                                static_cast<int64_t>(std::ceil(hi)));
    for (int64_t i = 0; i < size_; ++i) set(i, static_cast<double>(dist(rng)));
  }
}

void HostTensor::fill(double value) {
  for (int64_t i = 0; i < size_; ++i) set(i, value);
}

double relative_l2_error(const HostTensor &a, const HostTensor &b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (std::isnan(x) != std::isnan(y)) return std::numeric_limits<double>::infinity();
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return std::numeric_limits<double>::infinity();
      continue;
    }
    if (std::isnan(x)) continue;
    diff += (x - y) * (x - y);
    ref += y * y;
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-30);
}

bool exactly_equal(const HostTensor &a, const HostTensor &b) {
  if (a.size() != b.size() || a.dtype() != b.dtype()) return false;
  for (int64_t i = 0; i < a.size(); ++i) {
    if (a.get(i) != b.get(i)) return false;
  }
  return true;
}

}  // namespace kiln::ir
