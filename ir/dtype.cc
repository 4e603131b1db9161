#include "ir/dtype.h"

#include <stdexcept>

namespace kiln::ir {

const char *dtype_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt8:
      return "int8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t :
       {DType::kBool, DType::kInt8, DType::kInt32, DType::kInt64, DType::kFloat16, DType::kFloat32, DType::kBFloat16}) {
    if (name == dtype_name(t)) return t;
  }
  throw std::invalid_argument("unknown dtype '" + std::string(name) +
                              "'; expected one of bool, int8, int32, int64, float16, float32, bfloat16");
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::kBool:
      return 1;
    case DType::kInt8:
      return 1;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat16:
      return 2;
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
      return 2;
  }
  return 0;
}

}  // namespace kiln::ir
