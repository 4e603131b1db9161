// Tensor files for kiln run: NumPy .npy (format 1.0-3.0, C order, little-endian) or
// raw little-endian bytes in the model's shape and type.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ir/host_tensor.h"
#include "ir/tensor_type.h"

namespace kiln::executor {

struct TensorFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reads a tensor of type `want` from `path`. A file that starts with the .npy magic is
/// read as .npy: its shape must equal want's, and its dtype must be want's or one that
/// converts without surprise (float64 to float32/float16, int64 to int32/int8 when every
/// value fits). Any other file must hold exactly want's bytes, raw. A file longer than
/// any of want's size is refused before it is read whole. `warnings`, when given, gets a
/// line for what converted with a loss worth saying (float64 values beyond float32's
/// range, become infinite).
ir::HostTensor read_tensor_file(const std::string &path, const ir::TensorType &want,
                                std::vector<std::string> *warnings = nullptr);

/// The same for bytes already in memory; `name` names them in messages.
ir::HostTensor read_tensor_bytes(const std::string &bytes, const ir::TensorType &want, const std::string &name,
                                 std::vector<std::string> *warnings = nullptr);

/// Reads a .npy file of any shape as `dtype` (converting as read_tensor_file does): the
/// inputs of a model with dynamic dimensions, whose shapes the files give. A file longer
/// than `max_elements` elements could take is refused before it is read whole.
ir::HostTensor read_npy_file(const std::string &path, ir::DType dtype, int64_t max_elements,
                             std::vector<std::string> *warnings = nullptr);

/// `t` as a .npy file (format 1.0), byte for byte as NumPy writes it.
std::string npy_bytes(const ir::HostTensor &t);

/// Writes `t` to `path`: .npy (format 1.0) when the name ends in ".npy", raw bytes
/// otherwise.
void write_tensor_file(const std::string &path, const ir::HostTensor &t);

}  // namespace kiln::executor
