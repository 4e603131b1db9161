// ONNX TensorProto <-> host tensors, with every size claim checked against the bytes
// actually present (a model may claim a 2 GB tensor in a tiny file).
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "ir/host_tensor.h"

namespace kiln::frontend {

/// Kiln's dtype for an ONNX element type; throws ImportError naming `what` otherwise.
ir::DType dtype_from_onnx(int32_t elem_type, const std::string &what);

/// The data of an initializer or Constant value; throws ImportError naming the tensor
/// for external data, unsupported element types and sizes that do not match.
ir::HostTensor tensor_from_onnx(const onnx::TensorProto &t);

}  // namespace kiln::frontend
