#include "measure/tensor_data.h"

#include "support/bfloat16.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::measure::detail {

static constexpr size_t kAlignment = 64;

void AlignedBuffer::Free::operator()(void *p) const { std::free(p); }

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  // aligned_alloc wants a multiple of the alignment; a zero-sized tensor still gets a
  // valid, distinct pointer.
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  data_.reset(std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded));
  if (!data_) throw std::bad_alloc();
}

// splitmix64: tiny, fast and identical on every platform, unlike std:: distributions.
static uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) with 24 random bits: exactly representable in float32.
static float unit_float(uint64_t &state) {
  return static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static int64_t small_int(uint64_t &state) { return static_cast<int64_t>(splitmix64(state) % 9) - 4; }

static void fill(const ParamSpec &param, void *data, uint64_t state) {
  int64_t n = param.num_elements();
  switch (param.dtype) {
    case ir::DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) static_cast<float *>(data)[i] = unit_float(state);
      break;
    case ir::DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t *>(data)[i] = float_to_half(unit_float(state));
      break;
    case ir::DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t *>(data)[i] = support::float_to_bfloat16(unit_float(state));
      break;
    case ir::DType::kInt8:
      for (int64_t i = 0; i < n; ++i) static_cast<int8_t *>(data)[i] = static_cast<int8_t>(small_int(state));
      break;
    case ir::DType::kInt32:
      for (int64_t i = 0; i < n; ++i) static_cast<int32_t *>(data)[i] = static_cast<int32_t>(small_int(state));
      break;
    case ir::DType::kInt64:
      for (int64_t i = 0; i < n; ++i) static_cast<int64_t *>(data)[i] = small_int(state);
      break;
    case ir::DType::kBool:
      for (int64_t i = 0; i < n; ++i) static_cast<uint8_t *>(data)[i] = splitmix64(state) & 1;
      break;
  }
}

std::vector<AlignedBuffer> make_random_buffers(const std::vector<ParamSpec> &params, uint64_t seed, uint64_t stream) {
  std::vector<AlignedBuffer> buffers;
  buffers.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    buffers.emplace_back(static_cast<size_t>(params[i].num_bytes()));
    uint64_t state = seed;
    // Mix stream and index through the generator so nearby seeds give unrelated data.
    state ^= splitmix64(state) + stream * 0x632be59bd9b4e019ULL + i;
    fill(params[i], buffers.back().data(), splitmix64(state));
  }
  return buffers;
}

std::vector<void *> entry_args(const std::vector<AlignedBuffer> &buffers) {
  std::vector<void *> args;
  for (const AlignedBuffer &b : buffers) args.push_back(b.data());
  return args;
}

std::vector<void *> packed_entry_args(const LoadedArtifact &artifact, const std::vector<AlignedBuffer> &buffers,
                                      std::vector<AlignedBuffer> *packed, int32_t *code) {
  std::vector<void *> args = entry_args(buffers);
  *code = 0;
  if (artifact.packed.empty()) return args;
  std::vector<void *> prepack_args;
  size_t first = packed->size();
  packed->reserve(first + artifact.packed.size());  // the pointers below must stay valid
  for (const PackedParam &p : artifact.packed) {
    packed->emplace_back(static_cast<size_t>(p.layout.num_bytes()));
    prepack_args.push_back(args.at(p.index));
    prepack_args.push_back(packed->back().data());
  }
  *code = artifact.prepack(prepack_args.data());
  for (size_t k = 0; k < artifact.packed.size(); ++k) args[artifact.packed[k].index] = (*packed)[first + k].data();
  return args;
}

static std::string format_value(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

static bool same_nonfinite(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want;  // +-Inf must match exactly
}

template <typename T, typename ToDouble>
static std::optional<std::string> compare_floats(const T *got, const T *want, int64_t n, ToDouble to_double,
                                                 const Tolerance &tolerance) {
  double diff_sq = 0, want_sq = 0, max_abs = -1;
  int64_t max_index = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = to_double(got[i]), w = to_double(want[i]);
    if (!std::isfinite(g) || !std::isfinite(w)) {
      if (same_nonfinite(g, w)) continue;
      return "value at index " + std::to_string(i) + " is " + format_value(g) + " where the reference has " +
             format_value(w);
    }
    double d = std::fabs(g - w);
    diff_sq += d * d;
    want_sq += w * w;
    if (d > max_abs) {
      max_abs = d;
      max_index = i;
    }
  }
  double diff_l2 = std::sqrt(diff_sq), want_l2 = std::sqrt(want_sq);
  if (diff_l2 <= tolerance.rtol * want_l2 + tolerance.atol) return std::nullopt;
  std::string why = "max abs error " + format_value(max_abs) + " at index " + std::to_string(max_index) + " (got " +
                    format_value(to_double(got[max_index])) + ", want " + format_value(to_double(want[max_index])) +
                    "); ";
  if (want_l2 > 0) {
    return why + "relative L2 error " + format_value(diff_l2 / want_l2) + " > " + format_value(tolerance.rtol);
  }
  return why + "L2 error " + format_value(diff_l2) + " > " + format_value(tolerance.atol) +
         " (the reference is all zeros)";
}

template <typename T>
static std::optional<std::string> compare_exact(const T *got, const T *want, int64_t n) {
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    if (mismatches++ == 0) first = i;
  }
  if (mismatches == 0) return std::nullopt;
  return std::to_string(mismatches) + " of " + std::to_string(n) + " elements differ; the first at index " +
         std::to_string(first) + " (got " + std::to_string(static_cast<int64_t>(got[first])) + ", want " +
         std::to_string(static_cast<int64_t>(want[first])) + ")";
}

std::optional<std::string> compare_buffer(const ParamSpec &param, const void *got, std::string_view want,
                                          const Tolerance &tolerance) {
  if (static_cast<int64_t>(want.size()) != param.num_bytes()) {
    return "the reference has " + std::to_string(want.size()) + " bytes, the candidate " +
           std::to_string(param.num_bytes());
  }
  // Bit-identical is within every tolerance; inputs, which must come back unchanged, are
  // the large buffers (weights) and take this path.
  if (std::memcmp(got, want.data(), want.size()) == 0) return std::nullopt;
  int64_t n = param.num_elements();
  const void *w = want.data();
  switch (param.dtype) {
    case ir::DType::kFloat32:
      return compare_floats(
          static_cast<const float *>(got), static_cast<const float *>(w), n,
          [](float v) { return static_cast<double>(v); }, tolerance);
    case ir::DType::kFloat16:
      return compare_floats(
          static_cast<const uint16_t *>(got), static_cast<const uint16_t *>(w), n,
          [](uint16_t v) { return static_cast<double>(half_to_float(v)); }, tolerance);
    case ir::DType::kBFloat16:
      return compare_floats(
          static_cast<const uint16_t *>(got), static_cast<const uint16_t *>(w), n,
          [](uint16_t v) { return static_cast<double>(support::bfloat16_to_float(v)); }, tolerance);
    case ir::DType::kInt8:
      return compare_exact(static_cast<const int8_t *>(got), static_cast<const int8_t *>(w), n);
    case ir::DType::kInt32:
      return compare_exact(static_cast<const int32_t *>(got), static_cast<const int32_t *>(w), n);
    case ir::DType::kInt64:
      return compare_exact(static_cast<const int64_t *>(got), static_cast<const int64_t *>(w), n);
    case ir::DType::kBool:
      return compare_exact(static_cast<const uint8_t *>(got), static_cast<const uint8_t *>(w), n);
  }
  return "unsupported dtype";
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);  // Inf / NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round-to-nearest-even; only used for random inputs in [-1, 1], but handles all values.
uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t exponent = (bits >> 23) & 0xff;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent == 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0);
  int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    int shift = 14 - e;
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: correct
  return sign | static_cast<uint16_t>(half);
}

}  // namespace kiln::measure::detail
