#include "frontend/onnx_tensor.h"

#include <cstring>
#include <limits>
#include <map>

#include "frontend/onnx_import.h"

namespace kiln::frontend {

ir::DType dtype_from_onnx(int32_t elem_type, const std::string &what) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
      return ir::DType::kFloat32;
    case onnx::TensorProto::FLOAT16:
      return ir::DType::kFloat16;
    case onnx::TensorProto::BFLOAT16:
      return ir::DType::kBFloat16;
    case onnx::TensorProto::INT64:
      return ir::DType::kInt64;
    case onnx::TensorProto::INT32:
      return ir::DType::kInt32;
    case onnx::TensorProto::INT8:
      return ir::DType::kInt8;
    case onnx::TensorProto::BOOL:
      return ir::DType::kBool;
    default:
      break;
  }
  // Types newer than the ONNX library Kiln builds with, by their numbers in onnx.proto.
  static const std::map<int32_t, std::string> kNewer = {
      {17, "FLOAT8E4M3FN"}, {18, "FLOAT8E4M3FNUZ"}, {19, "FLOAT8E5M2"}, {20, "FLOAT8E5M2FNUZ"},
      {21, "UINT4"},        {22, "INT4"},           {23, "FLOAT4E2M1"}};
  const std::string name = onnx::TensorProto::DataType_IsValid(elem_type)
                               ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type))
                           : kNewer.count(elem_type) ? kNewer.at(elem_type)
                                                     : std::to_string(elem_type);
  throw ImportError(what + " has element type " + name +
                    "; Kiln supports float32, float16, bfloat16, int64, int32, int8 and bool");
}

ir::HostTensor tensor_from_onnx(const onnx::TensorProto &t) {
  const std::string what = "tensor '" + t.name() + "'";
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string file;
    for (const auto &entry : t.external_data())
      if (entry.key() == "location") file = entry.value();
    throw ImportError(what + " is stored in external file '" + file +
                      "', which is not read here (external data is read for initializers and Constant values "
                      "of the main graph)");
  }
  ir::DType dtype = dtype_from_onnx(t.data_type(), what);
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) throw ImportError(what + " has a negative dimension " + std::to_string(d));
    if (d != 0 && count > std::numeric_limits<int32_t>::max() / d)
      throw ImportError(what + " claims more than 2^31 elements (" + shape_string(shape) + ")");
    count *= d;
  }
  const int64_t bytes = count * ir::dtype_bytes(dtype);
  // Sizes are checked before anything is allocated: the claim is the file's, the bytes
  // are what it holds.
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != bytes)
      throw ImportError(what + " (" + shape_string(shape) + " " + ir::dtype_name(dtype) + ") needs " +
                        std::to_string(bytes) + " bytes but holds " + std::to_string(t.raw_data().size()));
    ir::HostTensor out(dtype, shape);
    if (bytes > 0) std::memcpy(out.data(), t.raw_data().data(), static_cast<size_t>(bytes));
    return out;
  }
  int64_t held = dtype == ir::DType::kFloat32 ? t.float_data_size()
                 : dtype == ir::DType::kInt64 ? t.int64_data_size()
                                              : t.int32_data_size();
  if (held != count)
    throw ImportError(what + " (" + shape_string(shape) + ") needs " + std::to_string(count) + " values but holds " +
                      std::to_string(held));
  ir::HostTensor out(dtype, shape);
  switch (dtype) {
    case ir::DType::kFloat32:
      if (count > 0) std::memcpy(out.data(), t.float_data().data(), static_cast<size_t>(bytes));
      break;
    case ir::DType::kInt64:
      if (count > 0) std::memcpy(out.data(), t.int64_data().data(), static_cast<size_t>(bytes));
      break;
    case ir::DType::kFloat16:
    case ir::DType::kBFloat16: {  // both keep their 16 bits widened in int32_data
      auto *dst = static_cast<uint16_t *>(out.data());
      for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
      break;
    }
    default:  // int32, int8 and bool are stored widened in int32_data
      for (int64_t i = 0; i < count; ++i) out.set(i, t.int32_data(static_cast<int>(i)));
      break;
  }
  return out;
}

}  // namespace kiln::frontend
