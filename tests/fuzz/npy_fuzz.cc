// Tensor files (kiln run --input/--compare): any bytes read as a 2x3 float32 or a
// 4-element int32 are refused with a TensorFileError, or read; a tensor that read
// writes back as a .npy that reads to the same values.
#include <cstring>
#include <stdexcept>

#include "executor/tensor_file.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(npy_file) {
  using kiln::ir::DType;
  for (const kiln::ir::TensorType &want :
       {kiln::ir::TensorType{{2, 3}, DType::kFloat32}, kiln::ir::TensorType{{4}, DType::kInt32}}) {
    kiln::ir::HostTensor t;
    try {
      t = kiln::executor::read_tensor_bytes(input, want, "input");
    } catch (const kiln::executor::TensorFileError &) {
      continue;
    }
    kiln::ir::HostTensor again = kiln::executor::read_tensor_bytes(kiln::executor::npy_bytes(t), want, "written");
    // Bytes, not values: raw input may hold NaNs, which equal nothing.
    size_t bytes = static_cast<size_t>(t.size() * kiln::ir::dtype_bytes(t.dtype()));
    if (again.shape() != t.shape() || std::memcmp(again.data(), t.data(), bytes) != 0)
      throw std::logic_error("a tensor does not survive writing and reading back");
  }
}
