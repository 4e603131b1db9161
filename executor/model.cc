#include "executor/model.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "codegen/runtime/abi.h"
#include "executor/gpu_steps.h"
#include "executor/memory_plan.h"
#include "support/json_checks.h"
#include "support/json_read.h"
#include "support/sha256.h"
#include "target/backend.h"
#include "target/target.h"

namespace kiln::executor {
namespace {

struct FreeArena {
  void operator()(void *p) const { std::free(p); }
};

int64_t checked_bytes(const ir::TensorType &type) {
  int64_t elements = 1;
  for (int64_t d : type.shape) {
    if (d < 0 || (d > 0 && elements > (int64_t{1} << 40) / d)) throw std::invalid_argument("a value is too large");
    elements *= d;
  }
  return elements * ir::dtype_bytes(type.dtype);
}

}  // namespace

struct Step {
  void *handle = nullptr;
  kiln_entry_fn entry = nullptr;
  std::vector<size_t> arg_ids;  // the subgraph's inputs, then its output (buffer indices)
  std::vector<void *> args;     // their data, or the packed copy of a weight
  std::string artifact;
  // Weights in the layouts the artifact reads (kiln_prepack); `args` points into them,
  // so each stays where it is when the steps' vector moves its elements.
  std::vector<std::unique_ptr<ir::HostTensor>> packed;
};

// A value's bytes: in the arena (activations) or in a constant (weights).
struct Buffer {
  void *data = nullptr;
  ir::TensorType type;
  int64_t bytes = 0;
  bool constant = false;  // a weight, from weights.bin
};

struct Model::Impl {
  std::string target;
  std::vector<ir::HostTensor> constants;
  std::unique_ptr<void, FreeArena> arena;
  int64_t arena_bytes = 0, unplanned_bytes = 0;
  std::vector<Buffer> buffers;
  std::vector<size_t> inputs, outputs;
  std::vector<std::string> input_names, output_names;
  std::vector<ir::TensorType> input_types, output_types;
  /// Per input: the rows of the table it indexes (it holds row indices), else 0.
  std::vector<int64_t> index_rows;
  std::vector<Step> steps;
  std::vector<StepInfo> step_infos;
  /// A model compiled for a GPU runs its steps there; `steps` is then empty and the
  /// host buffers of inputs and outputs are copied across around each inference.
  std::unique_ptr<GpuSteps> gpu;

  ~Impl() {
    for (Step &s : steps)
      if (s.handle) dlclose(s.handle);
  }
};

namespace {

// Weights a step reads in a layout packed ahead of time (codegen/runtime/abi.h, version 2) are
// packed here, once, with the artifact's kiln_prepack; the step then reads the copies.
void pack_constants(const std::vector<Buffer> &buffers, Step &step) {
  const char *text = static_cast<const char *>(dlsym(step.handle, KILN_INFO_SYMBOL));
  if (!text) throw ModelError(step.artifact + " is not a Kiln artifact (no " KILN_INFO_SYMBOL ")");
  nlohmann::json info = kiln::support::parse_json_or_discarded(text);
  if (info.is_discarded() || !info.contains("params") || info["params"].size() != step.args.size())
    throw ModelError(step.artifact + ": its " KILN_INFO_SYMBOL " does not match the model's step; compile it again");
  std::vector<void *> prepack_args;
  std::vector<size_t> slots;
  for (size_t i = 0; i < step.args.size(); ++i) {
    const nlohmann::json &param = info["params"][i];
    const Buffer &buffer = buffers.at(step.arg_ids.at(i));
    if (!param.contains("packed_from")) {
      // An artifact built for another subgraph would read and write past the buffers.
      if (param.at("shape").get<std::vector<int64_t>>() != buffer.type.shape ||
          param.at("dtype").get<std::string>() != ir::dtype_name(buffer.type.dtype))
        throw ModelError(step.artifact + ": its param " + std::to_string(i) +
                         " is not the model's buffer for this step (another shape or type); compile it again");
      continue;
    }
    const Buffer &weight = buffer;
    if (!weight.constant || weight.type.shape != param["packed_from"].at("shape").get<std::vector<int64_t>>())
      throw ModelError(step.artifact + " reads param " + std::to_string(i) +
                       " packed ahead of time, but the model gives it no weight of that shape; compile it again");
    ir::HostTensor &packed = *step.packed.emplace_back(std::make_unique<ir::HostTensor>(
        ir::parse_dtype(param.at("dtype").get<std::string>()), param.at("shape").get<std::vector<int64_t>>()));
    prepack_args.push_back(step.args[i]);
    prepack_args.push_back(packed.data());
    slots.push_back(i);
  }
  if (slots.empty()) return;
  auto prepack = reinterpret_cast<kiln_entry_fn>(dlsym(step.handle, KILN_PREPACK_SYMBOL));
  if (!prepack) throw ModelError(step.artifact + " has packed params but no " KILN_PREPACK_SYMBOL "; compile it again");
  if (int32_t rc = prepack(prepack_args.data()); rc != 0)
    throw ModelError("packing the weights of " + step.artifact + " failed with code " + std::to_string(rc));
  for (size_t k = 0; k < slots.size(); ++k) step.args[slots[k]] = prepack_args[2 * k + 1];
}

// A step's artifact as the manifest names it: a plain file name inside the model's
// folder, never a path that leads out of it.
std::string artifact_name(const nlohmann::json &step) {
  std::string name = step.at("artifact").get<std::string>();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    throw std::invalid_argument("artifact '" + name + "' is not a file name inside the model's folder");
  return name;
}

// The manifest's digest of an artifact, checked before the library is opened: dlopen
// runs a library's constructors, so nothing the manifest did not vouch for is loaded.
void check_digest(const std::string &path, const std::string &want) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError("cannot read " + path + ": compile the model again");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (support::sha256_hex(bytes) != want)
    throw ModelError(path + " is not the artifact the model was compiled with (its SHA-256 differs from " +
                     "model.json's): compile the model again");
}

// Opens `step.artifact` and packs its weights; `step.args` holds the plain buffers.
void load_artifact(const std::vector<Buffer> &buffers, Step &step) {
  step.handle = dlopen(step.artifact.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!step.handle) throw ModelError("cannot load " + step.artifact + ": " + dlerror());
  step.entry = reinterpret_cast<kiln_entry_fn>(dlsym(step.handle, KILN_ENTRY_SYMBOL));
  if (!step.entry) throw ModelError(step.artifact + " is not a Kiln artifact (no " KILN_ENTRY_SYMBOL ")");
  pack_constants(buffers, step);
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model &&) noexcept = default;
Model &Model::operator=(Model &&) noexcept = default;
Model::~Model() = default;

const std::vector<std::string> &Model::input_names() const { return impl_->input_names; }
const std::vector<ir::TensorType> &Model::input_types() const { return impl_->input_types; }
const std::vector<std::string> &Model::output_names() const { return impl_->output_names; }
const std::vector<ir::TensorType> &Model::output_types() const { return impl_->output_types; }
const std::string &Model::target() const { return impl_->target; }
size_t Model::num_steps() const { return impl_->step_infos.size(); }
const std::vector<StepInfo> &Model::steps() const { return impl_->step_infos; }
int64_t Model::arena_bytes() const { return impl_->arena_bytes; }
int64_t Model::unplanned_bytes() const { return impl_->unplanned_bytes; }
std::string Model::gpu_name() const { return impl_->gpu ? impl_->gpu->device_name() : ""; }

Model Model::load(const std::string &dir) {
  std::filesystem::path root(dir);
  std::ifstream manifest_file(root / "model.json");
  if (!manifest_file)
    throw ModelError("'" + dir + "' is not a compiled model (no model.json); make one with kiln compile");
  nlohmann::json m;
  try {
    m = kiln::support::parse_json(manifest_file);
    if (!m.at("kiln_model").is_number_integer() || m.at("kiln_model").get<int64_t>() != kModelFormatVersion)
      throw ModelError("'" + dir + "' has model format " + m.at("kiln_model").dump() + "; this Kiln reads " +
                       std::to_string(kModelFormatVersion) + ": compile it again");
  } catch (const nlohmann::json::exception &e) {
    throw ModelError("'" + dir + "/model.json' is damaged: " + e.what());
  }
  auto impl = std::make_unique<Impl>();
  auto damaged = [&](const std::string &why) { return ModelError("'" + dir + "/model.json' is damaged: " + why); };
  try {
    // Every number the loader reads as an integer must be one: converting 1e300 to
    // int64 is undefined behaviour, not an error.
    for (const char *field : {"arena_bytes", "unplanned_bytes", "values", "inputs", "outputs"})
      support::require_int64_numbers(m.at(field), std::string("'") + field + "'");
    for (const nlohmann::json &s : m.at("steps")) support::require_int64_numbers(s.at("args"), "a step's 'args'");
    if (m.contains("index_inputs")) support::require_int64_numbers(m.at("index_inputs"), "'index_inputs'");
    impl->target = m.at("target").get<std::string>();
    // dlopen of another architecture's library says only "cannot open shared object
    // file"; code for wider vectors than this CPU's would load and die of SIGILL.
    Target target;
    try {
      target = Target::parse(impl->target);
    } catch (const std::invalid_argument &e) {
      throw damaged(std::string("its target: ") + e.what());
    }
    if (!target.backend().is_gpu()) {
      if (std::string why = target.backend().why_this_host_cannot_run(target); !why.empty())
        throw ModelError("'" + dir + "' was compiled for target '" + impl->target + "', which this host cannot run (" +
                         why +
                         "): run it on such a machine, or compile the model again for this host (kiln compile "
                         "without --target)");
    }
    impl->arena_bytes = m.at("arena_bytes").get<int64_t>();
    impl->unplanned_bytes = m.at("unplanned_bytes").get<int64_t>();
    if (impl->arena_bytes < 0 || impl->arena_bytes > (int64_t{1} << 40)) throw damaged("arena_bytes out of range");
    // Every size is checked against what backs it before anything is allocated: a
    // damaged manifest must not make the loader allocate what it claims.
    std::error_code size_error;
    const auto file_bytes = std::filesystem::file_size(root / "weights.bin", size_error);
    const int64_t weight_bytes = size_error ? 0 : static_cast<int64_t>(file_bytes);
    const nlohmann::json &values = m.at("values");
    int64_t activation_bytes = 0;  // one buffer per activation: no plan needs more
    for (const nlohmann::json &v : values) {
      Buffer &b = impl->buffers.emplace_back();
      b.type = {v.at("shape").get<std::vector<int64_t>>(), ir::parse_dtype(v.at("dtype").get<std::string>())};
      b.bytes = checked_bytes(b.type);
      if (v.contains("offset")) {
        auto offset = v.at("offset").get<int64_t>();
        if (offset < 0) throw damaged("a weight's offset is negative");
        if (offset > weight_bytes || b.bytes > weight_bytes - offset)
          throw ModelError("'" + dir + "/weights.bin' is shorter than its manifest says (value " +
                           v.at("name").get<std::string>() + ")");
        b.constant = true;
      } else if (v.contains("arena_offset")) {
        auto offset = v.at("arena_offset").get<int64_t>();
        // Compared without adding: offset + bytes may overflow.
        if (offset < 0 || offset > impl->arena_bytes || b.bytes > impl->arena_bytes - offset)
          throw damaged("a value lies outside the arena");
        activation_bytes = std::min(activation_bytes + b.bytes, int64_t{1} << 62);
      }
    }
    if (impl->arena_bytes > activation_bytes + kArenaAlignment * static_cast<int64_t>(values.size()))
      throw damaged("arena_bytes is larger than all its activations together");
    impl->arena.reset(std::aligned_alloc(static_cast<size_t>(kArenaAlignment),
                                         static_cast<size_t>(std::max<int64_t>(impl->arena_bytes, kArenaAlignment))));
    if (!impl->arena) throw ModelError("cannot allocate the model's " + std::to_string(impl->arena_bytes) + " bytes");
    auto *arena = static_cast<std::byte *>(impl->arena.get());
    std::ifstream weights(root / "weights.bin", std::ios::binary);
    impl->constants.reserve(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const nlohmann::json &v = values[i];
      Buffer &b = impl->buffers[i];
      if (b.constant) {
        ir::HostTensor &t = impl->constants.emplace_back(b.type.dtype, b.type.shape);
        weights.seekg(v.at("offset").get<int64_t>());
        if (!weights.read(static_cast<char *>(t.data()), b.bytes))
          throw ModelError("cannot read '" + dir + "/weights.bin' (value " + v.at("name").get<std::string>() + ")");
        b.data = t.data();
      } else if (v.contains("arena_offset")) {
        b.data = arena + v.at("arena_offset").get<int64_t>();
      }
    }
    auto index = [&](const nlohmann::json &j) {
      auto i = j.get<size_t>();
      if (i >= impl->buffers.size() || !impl->buffers[i].data)
        throw damaged("it names buffer " + std::to_string(i) + ", which has no storage");
      return i;
    };
    for (const nlohmann::json &i : m.at("inputs")) {
      impl->inputs.push_back(index(i));
      impl->input_names.push_back(values[impl->inputs.back()].at("name"));
      impl->input_types.push_back(impl->buffers[impl->inputs.back()].type);
    }
    for (const nlohmann::json &o : m.at("outputs")) {
      impl->outputs.push_back(index(o));
      impl->output_names.push_back(values[impl->outputs.back()].at("name"));
      impl->output_types.push_back(impl->buffers[impl->outputs.back()].type);
    }
    impl->index_rows.assign(impl->inputs.size(), 0);
    if (m.contains("index_inputs")) {
      for (const nlohmann::json &e : m.at("index_inputs")) {
        auto k = e.at("input").get<size_t>();
        auto rows = e.at("rows").get<int64_t>();
        if (k >= impl->inputs.size() || rows < 1 || !ir::is_int(impl->input_types[k].dtype))
          throw damaged("an index input names input " + std::to_string(k) + " with " + std::to_string(rows) +
                        " rows, which is not an integer input of the model");
        impl->index_rows[k] = rows;
      }
    }
    if (m.at("steps").empty()) throw damaged("it has no steps");
    if (impl->outputs.empty()) throw damaged("it has no outputs");
    const std::string device = m.value("device", "cpu");
    if (device != "cpu" && device != "cuda")
      throw ModelError("'" + dir + "' was compiled for a '" + device + "' device, which this Kiln does not run");
    std::vector<GpuStepSpec> gpu_steps;
    for (const nlohmann::json &s : m.at("steps")) {
      const std::string artifact = (root / artifact_name(s)).string();
      check_digest(artifact, s.at("sha256").get<std::string>());
      if (device == "cuda") {
        GpuStepSpec &step = gpu_steps.emplace_back();
        step.artifact = artifact;
        for (const nlohmann::json &a : s.at("args")) step.buffer_ids.push_back(index(a));
      } else {
        Step &step = impl->steps.emplace_back();  // owned from here: closed if a later step fails
        step.artifact = artifact;
        for (const nlohmann::json &a : s.at("args")) {
          step.arg_ids.push_back(index(a));
          step.args.push_back(impl->buffers[step.arg_ids.back()].data);
        }
        load_artifact(impl->buffers, step);
      }
      StepInfo &info = impl->step_infos.emplace_back();
      info.workload = s.value("workload", "");
      info.key_hash = s.value("key_hash", "");
      info.tuned = s.value("tuned", false);
      if (s.contains("tuned_ms")) info.tuned_ms = s.at("tuned_ms").get<double>();
    }
    if (device == "cuda") {
      std::vector<GpuBufferSpec> buffers;
      for (size_t i = 0; i < values.size(); ++i) {
        const Buffer &b = impl->buffers[i];
        GpuBufferSpec &g = buffers.emplace_back();
        g.type = b.type;
        g.bytes = b.bytes;
        if (b.constant)
          g.constant = b.data;
        else if (values[i].contains("arena_offset"))
          g.arena_offset = values[i].at("arena_offset").get<int64_t>();
      }
      impl->gpu = std::make_unique<GpuSteps>(m.at("arch").get<std::string>(), impl->arena_bytes, buffers, gpu_steps);
    }
  } catch (const nlohmann::json::exception &e) {
    throw damaged(e.what());
  } catch (const std::invalid_argument &e) {
    throw damaged(e.what());
  }
  return Model(std::move(impl));
}

void Model::replace_step(size_t i, const std::string &artifact) {
  if (impl_->gpu) throw ModelError("a GPU model's steps are not replaced: programs are chosen inside CPU models only");
  Step &old = impl_->steps.at(i);
  Step step;
  step.artifact = artifact;
  step.arg_ids = old.arg_ids;
  for (size_t id : step.arg_ids) step.args.push_back(impl_->buffers[id].data);
  try {
    try {
      load_artifact(impl_->buffers, step);
    } catch (const nlohmann::json::exception &e) {
      throw ModelError(artifact + ": its " KILN_INFO_SYMBOL " is damaged: " + e.what());
    }
  } catch (...) {
    if (step.handle) dlclose(step.handle);
    throw;
  }
  dlclose(old.handle);
  old = std::move(step);
}

std::vector<ir::HostTensor> Model::random_inputs(uint64_t seed) const {
  std::mt19937_64 rng(seed);
  std::vector<ir::HostTensor> inputs;
  for (size_t k = 0; k < impl_->input_types.size(); ++k) {
    const ir::TensorType &t = impl_->input_types[k];
    inputs.emplace_back(t.dtype, t.shape);
    // Row indices are drawn from their table's rows.
    const int64_t rows = impl_->index_rows[k];
    rows > 0 ? inputs.back().fill_random(rng, 0, static_cast<double>(rows - 1)) : inputs.back().fill_random(rng);
  }
  return inputs;
}

void Model::set_threads(int threads) { kiln_rt_set_num_threads(threads); }

void *Model::input_data(size_t i) { return impl_->buffers.at(impl_->inputs.at(i)).data; }

const void *Model::output_data(size_t i) const { return impl_->buffers.at(impl_->outputs.at(i)).data; }

namespace {
void call_step(Step &s) {
  int32_t rc = s.entry(s.args.data());
  if (rc != 0) throw ModelError("subgraph " + s.artifact + " failed with code " + std::to_string(rc));
}
}  // namespace

// Kernels clamp an index outside its table (no read outside it); a clear error is better.
void Model::check_index_inputs() const {
  const Impl &m = *impl_;
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const int64_t rows = m.index_rows[k];
    if (rows == 0) continue;
    const Buffer &b = m.buffers[m.inputs[k]];
    const int64_t n = b.bytes / ir::dtype_bytes(b.type.dtype);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = b.type.dtype == ir::DType::kInt64   ? static_cast<const int64_t *>(b.data)[i]
                  : b.type.dtype == ir::DType::kInt32 ? static_cast<const int32_t *>(b.data)[i]
                                                      : static_cast<const int8_t *>(b.data)[i];
      if (v < -rows || v >= rows)
        throw ModelError("input '" + m.input_names[k] + "' holds " + std::to_string(v) + " at element " +
                         std::to_string(i) + ", but it indexes a table of " + std::to_string(rows) +
                         " rows: give indices from 0 to " + std::to_string(rows - 1) +
                         " (negative ones count from the end)");
    }
  }
}

void Model::run() {
  check_index_inputs();
  Impl &m = *impl_;
  if (!m.gpu) {
    for (Step &s : m.steps) call_step(s);
    return;
  }
  for (size_t i : m.inputs) m.gpu->upload(i, m.buffers[i].data);
  m.gpu->run();
  for (size_t o : m.outputs)
    if (!m.buffers[o].constant) m.gpu->download(o, m.buffers[o].data);
}

std::vector<double> Model::profile_steps(const std::vector<ir::HostTensor> &inputs, int runs) {
  std::vector<std::vector<double>> ms(num_steps());
  for (int r = 0; r < runs; ++r) {
    set_inputs(inputs);  // untimed; a dead input's bytes may hold a later step's output
    check_index_inputs();
    if (impl_->gpu) {
      for (size_t i : impl_->inputs) impl_->gpu->upload(i, impl_->buffers[i].data);
      std::vector<double> step_ms = impl_->gpu->time_steps();
      for (size_t i = 0; i < step_ms.size(); ++i) ms[i].push_back(step_ms[i]);
      continue;
    }
    for (size_t i = 0; i < impl_->steps.size(); ++i) {
      auto start = std::chrono::steady_clock::now();
      call_step(impl_->steps[i]);
      ms[i].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::vector<double> medians;
  for (std::vector<double> &m : ms) {
    std::nth_element(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(m.size() / 2), m.end());
    medians.push_back(m.empty() ? 0.0 : m[m.size() / 2]);
  }
  return medians;
}

void Model::set_inputs(const std::vector<ir::HostTensor> &inputs) {
  Impl &m = *impl_;
  if (inputs.size() != m.inputs.size())
    throw ModelError("the model has " + std::to_string(m.inputs.size()) + " inputs, " + std::to_string(inputs.size()) +
                     " given");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Buffer &buffer = m.buffers[m.inputs[i]];
    if (inputs[i].shape() != buffer.type.shape || inputs[i].dtype() != buffer.type.dtype)
      throw ModelError("input '" + m.input_names[i] + "' must be " + ir::dtype_name(buffer.type.dtype) + " of " +
                       std::to_string(buffer.bytes / ir::dtype_bytes(buffer.type.dtype)) +
                       " elements in the model's shape");
    std::memcpy(buffer.data, inputs[i].data(), static_cast<size_t>(buffer.bytes));
  }
}

std::vector<ir::HostTensor> Model::run(const std::vector<ir::HostTensor> &inputs) {
  Impl &m = *impl_;
  set_inputs(inputs);
  run();
  std::vector<ir::HostTensor> out;
  for (size_t o : m.outputs) {
    const Buffer &buffer = m.buffers[o];
    ir::HostTensor &t = out.emplace_back(buffer.type.dtype, buffer.type.shape);
    std::memcpy(t.data(), buffer.data, static_cast<size_t>(buffer.bytes));
  }
  return out;
}

}  // namespace kiln::executor
