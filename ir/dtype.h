// Element types of tensors and expressions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::ir {

/// Scalar element types. Index arithmetic is always kInt64. kBFloat16 is bfloat16:
/// float32's exponent with 7 fraction bits, stored in 2 bytes; its arithmetic is
/// float32's rounded to bfloat16 (round to nearest even) after every operation, as
/// hardware without bfloat16 arithmetic does it.
enum class DType : uint8_t { kBool, kInt8, kInt32, kInt64, kFloat16, kFloat32, kBFloat16 };

const char *dtype_name(DType t);
/// Parses "float32", "int8", ...; throws std::invalid_argument naming the accepted spellings.
DType parse_dtype(std::string_view name);
inline bool is_float(DType t) { return t == DType::kFloat16 || t == DType::kFloat32 || t == DType::kBFloat16; }
inline bool is_int(DType t) { return t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64; }
int dtype_bytes(DType t);

}  // namespace kiln::ir
