#include "cli/compiled_model_files.h"

#include "cli/workload_args.h"

#include <iostream>

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

namespace {

void print_warnings(const std::vector<std::string> &warnings) {
  for (const std::string &w : warnings) std::cerr << "warning: " << w << "\n";
}

}  // namespace

ir::HostTensor read_npy(const std::string &path, ir::DType dtype, int64_t max_elements) {
  std::vector<std::string> warnings;
  try {
    ir::HostTensor t = executor::read_npy_file(path, dtype, max_elements, &warnings);
    print_warnings(warnings);
    return t;
  } catch (const executor::TensorFileError &e) {
    fail(e.what());
  }
}

ir::HostTensor read_tensor(const std::string &path, const ir::TensorType &type) {
  std::vector<std::string> warnings;
  try {
    ir::HostTensor t = executor::read_tensor_file(path, type, &warnings);
    print_warnings(warnings);
    return t;
  } catch (const executor::TensorFileError &e) {
    fail(e.what());
  }
}

}  // namespace kiln::cli
