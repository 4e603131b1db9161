// Buffers, random inputs and the comparison against the reference, in-process.
#include "measure/tensor_data.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

namespace kiln::measure::detail {
namespace {

ParamSpec spec(ir::DType dtype, std::vector<int64_t> shape, std::string role = "output") {
  ParamSpec p;
  p.name = "C";
  p.dtype = dtype;
  p.shape = std::move(shape);
  p.role = std::move(role);
  return p;
}

std::string_view bytes(const std::vector<float> &v) {
  return {reinterpret_cast<const char *>(v.data()), v.size() * sizeof(float)};
}

TEST(TensorData, RandomBuffersAreAlignedDeterministicAndInRange) {
  std::vector<ParamSpec> params = {spec(ir::DType::kFloat32, {3, 5}), spec(ir::DType::kInt32, {7}),
                                   spec(ir::DType::kFloat16, {9}), spec(ir::DType::kBool, {0})};
  auto a = make_random_buffers(params, 1, 0);
  auto b = make_random_buffers(params, 1, 0);
  auto other_seed = make_random_buffers(params, 2, 0);
  auto other_stream = make_random_buffers(params, 1, 1);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a[i].data()) % 64, 0u);
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size()), 0);
  }
  EXPECT_NE(std::memcmp(a[0].data(), other_seed[0].data(), a[0].size()), 0);
  EXPECT_NE(std::memcmp(a[0].data(), other_stream[0].data(), a[0].size()), 0);
  const float *f = static_cast<const float *>(a[0].data());
  for (int i = 0; i < 15; ++i) EXPECT_TRUE(f[i] >= -1 && f[i] <= 1) << f[i];
  const int32_t *n = static_cast<const int32_t *>(a[1].data());
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(n[i] >= -4 && n[i] <= 4) << n[i];
}

TEST(TensorData, FloatsMatchWithinRelativeL2Tolerance) {
  ParamSpec p = spec(ir::DType::kFloat32, {4});
  std::vector<float> want = {1, 2, 3, 4};
  std::vector<float> close = {1, 2, 3, 4.0001f};
  EXPECT_EQ(compare_buffer(p, close.data(), bytes(want), Tolerance{}), std::nullopt);
  std::vector<float> far = {1, 2, 7, 4};
  auto why = compare_buffer(p, far.data(), bytes(want), Tolerance{});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("max abs error 4 at index 2 (got 7, want 3)"), std::string::npos) << *why;
  EXPECT_NE(why->find("relative L2 error 0.73"), std::string::npos) << *why;
  EXPECT_NE(why->find("> 0.0001"), std::string::npos) << *why;
}

TEST(TensorData, NanAndInfMustAppearWhereTheReferenceHasThem) {
  ParamSpec p = spec(ir::DType::kFloat32, {3});
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> want = {nan, inf, 1};
  std::vector<float> same = {nan, inf, 1};
  EXPECT_EQ(compare_buffer(p, same.data(), bytes(want), Tolerance{}), std::nullopt);
  std::vector<float> nan_elsewhere = {nan, inf, nan};
  auto why = compare_buffer(p, nan_elsewhere.data(), bytes(want), Tolerance{});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("index 2 is nan where the reference has 1"), std::string::npos) << *why;
  std::vector<float> wrong_inf = {nan, -inf, 1};
  EXPECT_TRUE(compare_buffer(p, wrong_inf.data(), bytes(want), Tolerance{}));
}

TEST(TensorData, AllZeroReferenceUsesTheAbsoluteTolerance) {
  ParamSpec p = spec(ir::DType::kFloat32, {2});
  std::vector<float> want = {0, 0};
  std::vector<float> tiny = {1e-8f, 0};
  EXPECT_EQ(compare_buffer(p, tiny.data(), bytes(want), Tolerance{}), std::nullopt);
  std::vector<float> big = {0.5f, 0};
  auto why = compare_buffer(p, big.data(), bytes(want), Tolerance{});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("reference is all zeros"), std::string::npos) << *why;
}

TEST(TensorData, IntegersMustMatchExactly) {
  ParamSpec p = spec(ir::DType::kInt32, {4});
  std::vector<int32_t> want = {1, 2, 3, 4}, got = {1, 5, 3, 6};
  std::string_view w(reinterpret_cast<const char *>(want.data()), 16);
  EXPECT_EQ(compare_buffer(p, want.data(), w, Tolerance{}), std::nullopt);
  auto why = compare_buffer(p, got.data(), w, Tolerance{});
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "2 of 4 elements differ; the first at index 1 (got 5, want 2)");
}

TEST(TensorData, HalfConversionRoundTrips) {
  for (float f : {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 1.0f / 4096)), 1.0f);  // rounds to nearest even
}

}  // namespace
}  // namespace kiln::measure::detail
