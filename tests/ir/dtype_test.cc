// Element types: bfloat16's conversions and the interpreter's rounding of its arithmetic.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/dtype.h"
#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "ops/workload.h"

namespace kiln::ir {
namespace {

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(dtype_bytes(DType::kBFloat16), 2);
  EXPECT_TRUE(is_float(DType::kBFloat16));
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(-2.0f), 0xc000);
  // Halfway between two bfloat16 values: to the even one.
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3f808000)), 0x3f80);  // 1 + 2^-8: down to 1
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3f818000)), 0x3f82);  // 1 + 3 * 2^-8: up
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3f808001)), 0x3f81);  // just above halfway: up
  EXPECT_EQ(float_to_bfloat16(from_bits(0x3f807fff)), 0x3f80);  // just below: down
  // Infinities stay; the largest float rounds to infinity; NaN stays a (quiet) NaN.
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(from_bits(0x7f800001)))));  // signalling: not inf
  // Signed zero and the smallest subnormal survive.
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(bfloat16_to_float(0x0001), from_bits(0x00010000));
  // Host tensors store bfloat16's bits and give back the rounded value.
  HostTensor t(DType::kBFloat16, {2});
  t.set(0, 3.14159);
  t.set(1, -1e-3);
  EXPECT_EQ(t.get(0), 3.140625);
  EXPECT_EQ(static_cast<float>(t.get(1)), bfloat16_to_float(float_to_bfloat16(-1e-3f)));
}

// bfloat16 arithmetic is float32's rounded to bfloat16 after every operation: a sum of
// 1 and 2^-9 is 1 in bfloat16, and an element-wise op's result is a bfloat16 value.
TEST(BFloat16, TheInterpreterRoundsEveryOperation) {
  ops::Workload add = ops::Workload::single(
      "add", {TensorType{{3}, DType::kBFloat16}, TensorType{{3}, DType::kBFloat16}}, nlohmann::json::object());
  HostTensor a(DType::kBFloat16, {3}), b(DType::kBFloat16, {3});
  const double as[] = {1.0, 256.0, -3.0}, bs[] = {1.0 / 512, 1.0, 1.0 / 1024};
  for (int64_t i = 0; i < 3; ++i) {
    a.set(i, as[i]);
    b.set(i, bs[i]);
  }
  std::vector<HostTensor> out = interpret(add.lower(), {a, b});
  ASSERT_EQ(out.at(0).dtype(), DType::kBFloat16);
  EXPECT_EQ(out[0].get(0), 1.0);    // 1 + 2^-9 rounds back to 1
  EXPECT_EQ(out[0].get(1), 256.0);  // 257 needs 9 bits: ties to even, 256
  EXPECT_EQ(out[0].get(2), -3.0);
}

}  // namespace
}  // namespace kiln::ir
