// What `kiln run` and `kiln bench` share: loading a compiled model and reading a tensor
// file, failing with the library's message.
#pragma once

#include <cstdint>
#include <string>

#include "executor/dynamic_model.h"
#include "executor/model.h"
#include "executor/tensor_file.h"
#include "ir/host_tensor.h"

namespace kiln::cli {

executor::Model load_compiled_model(const std::string &dir);
executor::DynamicModel load_dynamic_model(const std::string &dir);
/// Conversion warnings (float64 beyond float32's range) are printed to stderr.
ir::HostTensor read_tensor(const std::string &path, const ir::TensorType &type);
/// A .npy file of any shape up to `max_elements` (an input of a model with dynamic
/// dimensions).
ir::HostTensor read_npy(const std::string &path, ir::DType dtype, int64_t max_elements);

}  // namespace kiln::cli
