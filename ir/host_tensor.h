// Dense host tensors used by the interpreter, tests and the measurement harness.
#pragma once

#include "support/bfloat16.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <vector>

#include "ir/expr.h"

namespace kiln::ir {

/// 64-byte aligned storage: the artifact ABI promises kernels aligned buffers.
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U> &) {}  // NOLINT(google-explicit-constructor)
  T *allocate(size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const AlignedAllocator<U> &) const {
    return true;
  }
};

/// Row-major storage of one buffer's elements in their real dtype.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);
  static HostTensor like(const Buffer &b) { return HostTensor(b->dtype, b->shape); }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t size() const { return size_; }
  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }

  /// Element access through double; set() rounds to the dtype (float32 rounding,
  /// int32/int8 wrap-around, float16 round-to-nearest-even).
  double get(int64_t flat_index) const;
  void set(int64_t flat_index, double value);

  /// Fills with uniform values in [lo, hi] (integers for integer dtypes).
  void fill_random(std::mt19937_64 &rng, double lo = -1.0, double hi = 1.0);
  void fill(double value);

 private:
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  int64_t size_ = 0;
  std::vector<uint8_t, AlignedAllocator<uint8_t>> bytes_;
};

/// ‖a − b‖₂ / max(‖b‖₂, tiny); used with tolerance 1e-5 for float32 checks.
double relative_l2_error(const HostTensor &a, const HostTensor &b);
/// True when every element is bit-for-bit equal as a value (integers exact).
bool exactly_equal(const HostTensor &a, const HostTensor &b);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
using support::bfloat16_to_float;  // support/bfloat16.h
using support::float_to_bfloat16;

}  // namespace kiln::ir
