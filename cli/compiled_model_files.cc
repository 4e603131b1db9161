#include "cli/compiled_model_files.h"

#include "cli/workload_args.h"

namespace kiln::cli {

executor::Model load_compiled_model(const std::string &dir) {
  try {
    return executor::Model::load(dir);
  } catch (const executor::ModelError &e) {
    fail(e.what());
  }
}

executor::DynamicModel load_dynamic_model(const std::string &dir) {
  try {
    return executor::DynamicModel::load(dir);
  } catch (const executor::ModelError &e) {
    fail(e.what());
  }
}

ir::HostTensor read_npy(const std::string &path, ir::DType dtype) {
  try {
    return executor::read_npy_file(path, dtype);
  } catch (const executor::TensorFileError &e) {
    fail(e.what());
  }
}

ir::HostTensor read_tensor(const std::string &path, const ir::TensorType &type) {
  try {
    return executor::read_tensor_file(path, type);
  } catch (const executor::TensorFileError &e) {
    fail(e.what());
  }
}

}  // namespace kiln::cli
