#include "executor/model.h"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "codegen/abi.h"

namespace kiln::executor {

struct Step {
  void *handle = nullptr;
  kiln_entry_fn entry = nullptr;
  std::vector<size_t> args;  // buffer indices: inputs, then the output
  std::string artifact;
};

struct Model::Impl {
  std::string target;
  std::vector<ir::HostTensor> buffers;
  std::vector<size_t> inputs, outputs;
  std::vector<std::string> input_names, output_names;
  std::vector<ir::TensorType> input_types, output_types;
  std::vector<Step> steps;

  ~Impl() {
    for (Step &s : steps)
      if (s.handle) dlclose(s.handle);
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

const std::vector<std::string> &Model::input_names() const { return impl_->input_names; }
const std::vector<ir::TensorType> &Model::input_types() const { return impl_->input_types; }
const std::vector<std::string> &Model::output_names() const { return impl_->output_names; }
const std::vector<ir::TensorType> &Model::output_types() const { return impl_->output_types; }
const std::string &Model::target() const { return impl_->target; }
size_t Model::num_steps() const { return impl_->steps.size(); }

Model Model::load(const std::string &dir) {
  std::filesystem::path root(dir);
  std::ifstream manifest_file(root / "model.json");
  if (!manifest_file)
    throw ModelError("'" + dir + "' is not a compiled model (no model.json); make one with kiln compile");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(manifest_file);
    if (m.at("kiln_model").get<int>() != kModelFormatVersion)
      throw ModelError("'" + dir + "' has model format " + m.at("kiln_model").dump() + "; this Kiln reads " +
                       std::to_string(kModelFormatVersion) + ": compile it again");
  } catch (const nlohmann::json::exception &e) {
    throw ModelError("'" + dir + "/model.json' is damaged: " + e.what());
  }
  auto impl = std::make_unique<Impl>();
  try {
    impl->target = m.at("target").get<std::string>();
    std::ifstream weights(root / "weights.bin", std::ios::binary);
    const nlohmann::json &values = m.at("values");
    for (const nlohmann::json &v : values) {
      ir::HostTensor t(ir::parse_dtype(v.at("dtype").get<std::string>()), v.at("shape").get<std::vector<int64_t>>());
      if (v.contains("offset")) {
        auto offset = v.at("offset").get<int64_t>();
        int64_t bytes = t.size() * ir::dtype_bytes(t.dtype());
        weights.seekg(offset);
        if (!weights.read(static_cast<char *>(t.data()), bytes))
          throw ModelError("'" + dir + "/weights.bin' is shorter than its manifest says (value " +
                           v.at("name").get<std::string>() + ")");
      }
      impl->buffers.push_back(std::move(t));
    }
    auto index = [&](const nlohmann::json &j) {
      auto i = j.get<size_t>();
      if (i >= impl->buffers.size())
        throw ModelError("'" + dir + "/model.json' names buffer " + std::to_string(i) + ", which does not exist");
      return i;
    };
    for (const nlohmann::json &i : m.at("inputs")) {
      impl->inputs.push_back(index(i));
      impl->input_names.push_back(values[impl->inputs.back()].at("name"));
      impl->input_types.push_back(
          {impl->buffers[impl->inputs.back()].shape(), impl->buffers[impl->inputs.back()].dtype()});
    }
    for (const nlohmann::json &o : m.at("outputs")) {
      impl->outputs.push_back(index(o));
      impl->output_names.push_back(values[impl->outputs.back()].at("name"));
      impl->output_types.push_back(
          {impl->buffers[impl->outputs.back()].shape(), impl->buffers[impl->outputs.back()].dtype()});
    }
    for (const nlohmann::json &s : m.at("steps")) {
      Step step;
      step.artifact = (root / s.at("artifact").get<std::string>()).string();
      for (const nlohmann::json &a : s.at("args")) step.args.push_back(index(a));
      step.handle = dlopen(step.artifact.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!step.handle) throw ModelError("cannot load " + step.artifact + ": " + dlerror());
      impl->steps.push_back(step);  // owned from here: closed if a later step fails
      impl->steps.back().entry = reinterpret_cast<kiln_entry_fn>(dlsym(step.handle, KILN_ENTRY_SYMBOL));
      if (!impl->steps.back().entry)
        throw ModelError(step.artifact + " is not a Kiln artifact (no " KILN_ENTRY_SYMBOL ")");
    }
  } catch (const nlohmann::json::exception &e) {
    throw ModelError("'" + dir + "/model.json' is damaged: " + e.what());
  } catch (const std::invalid_argument &e) {
    throw ModelError("'" + dir + "/model.json' is damaged: " + e.what());
  }
  return Model(std::move(impl));
}

void Model::set_threads(int threads) { kiln_rt_set_num_threads(threads); }

std::vector<ir::HostTensor> Model::run(const std::vector<ir::HostTensor> &inputs) {
  Impl &m = *impl_;
  if (inputs.size() != m.inputs.size())
    throw ModelError("the model has " + std::to_string(m.inputs.size()) + " inputs, " + std::to_string(inputs.size()) +
                     " given");
  for (size_t i = 0; i < inputs.size(); ++i) {
    ir::HostTensor &buffer = m.buffers[m.inputs[i]];
    if (inputs[i].shape() != buffer.shape() || inputs[i].dtype() != buffer.dtype())
      throw ModelError("input '" + m.input_names[i] + "' must be " + ir::dtype_name(buffer.dtype()) + " of " +
                       std::to_string(buffer.size()) + " elements in the model's shape");
    std::memcpy(buffer.data(), inputs[i].data(), static_cast<size_t>(buffer.size() * ir::dtype_bytes(buffer.dtype())));
  }
  std::vector<void *> args;
  for (const Step &s : m.steps) {
    args.clear();
    for (size_t b : s.args) args.push_back(m.buffers[b].data());
    int32_t rc = s.entry(args.data());
    if (rc != 0) throw ModelError("subgraph " + s.artifact + " failed with code " + std::to_string(rc));
  }
  std::vector<ir::HostTensor> out;
  for (size_t o : m.outputs) out.push_back(m.buffers[o]);
  return out;
}

}  // namespace kiln::executor
