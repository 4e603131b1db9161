// The C API: a translation layer from kiln_model.h to kiln::executor::Model.
// Every entry point catches everything, so no exception reaches C.

#include "kiln_model.h"

#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "executor/dynamic_model.h"
#include "executor/model.h"

namespace {

struct TensorInfo {
  std::string name, dtype;
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

TensorInfo describe(const std::string &name, const kiln::ir::TensorType &type) {
  TensorInfo info{name, kiln::ir::dtype_name(type.dtype), type.shape, 0};
  int64_t elements = 1;
  for (int64_t d : type.shape) elements *= d;
  info.bytes = static_cast<size_t>(elements * kiln::ir::dtype_bytes(type.dtype));
  return info;
}

}  // namespace

// A tensor of a model with dynamic dimensions: -1 at a dynamic axis, no fixed size.
TensorInfo describe(const kiln::executor::DynamicTensor &t) {
  TensorInfo info{t.name, kiln::ir::dtype_name(t.dtype), {}, 0};
  int64_t elements = 1;
  bool fixed = true;
  for (const kiln::executor::DynamicAxis &a : t.axes) {
    info.shape.push_back(a.dim < 0 ? a.extent : -1);
    fixed = fixed && a.dim < 0;
    elements *= a.dim < 0 ? a.extent : 1;
  }
  if (fixed) info.bytes = static_cast<size_t>(elements * kiln::ir::dtype_bytes(t.dtype));
  return info;
}

struct kiln_model_s {
  std::optional<kiln::executor::Model> model;           // a fixed-shape model, loaded
  std::optional<kiln::executor::DynamicModel> dynamic;  // or one with dynamic dimensions
  std::vector<TensorInfo> inputs, outputs;
  std::string last_error;
  // A dynamic model's inputs as set, and its outputs of the last run.
  std::vector<kiln::ir::HostTensor> dynamic_inputs, dynamic_outputs;

  bool loaded() const { return model || dynamic; }
};

static kiln_model_status fail(kiln_model m, kiln_model_status status, std::string message) {
  try {
    m->last_error = std::move(message);
  } catch (...) {
    // Out of memory while storing the message: keep the status, lose the text.
  }
  return status;
}

// Runs `body`, turning any exception into a status and the handle's message.
template <class F>
static kiln_model_status caught(kiln_model m, F &&body) {
  try {
    m->last_error.clear();
    return body();
  } catch (const kiln::executor::ModelError &e) {
    return fail(m, KILN_MODEL_ERROR, e.what());
  } catch (const std::bad_alloc &) {
    return fail(m, KILN_MODEL_ERROR, "out of memory");
  } catch (const std::exception &e) {
    return fail(m, KILN_MODEL_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(m, KILN_MODEL_ERROR, "internal error: unknown exception");
  }
}

// The same, for a call that needs a loaded model.
template <class F>
static kiln_model_status guarded(kiln_model m, const char *function, F &&body) {
  if (!m) return KILN_MODEL_INVALID_ARGUMENT;
  if (!m->loaded()) return fail(m, KILN_MODEL_INVALID_ARGUMENT, std::string(function) + ": the model was not loaded");
  return caught(m, body);
}

static kiln_model_status check_index(kiln_model m, const char *function, size_t index, size_t count, const char *what) {
  if (index < count) return KILN_MODEL_OK;
  return fail(m, KILN_MODEL_INVALID_ARGUMENT,
              std::string(function) + ": " + what + " " + std::to_string(index) + " does not exist (the model has " +
                  std::to_string(count) + ")");
}

static void fill(const TensorInfo &info, kiln_model_tensor_info *out) {
  out->name = info.name.c_str();
  out->dtype = info.dtype.c_str();
  out->rank = static_cast<int>(info.shape.size());
  out->shape = info.shape.data();
  out->bytes = info.bytes;
}

extern "C" kiln_model_status kiln_model_load(const char *dir, kiln_model *out_model) {
  if (!out_model) return KILN_MODEL_INVALID_ARGUMENT;
  *out_model = new (std::nothrow) kiln_model_s();
  kiln_model m = *out_model;
  if (!m) return KILN_MODEL_ERROR;
  if (!dir) return fail(m, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_load: dir is NULL");
  return caught(m, [&] {
    if (kiln::executor::is_dynamic_model(dir)) {
      kiln::executor::DynamicModel model = kiln::executor::DynamicModel::load(dir);
      for (const kiln::executor::DynamicTensor &t : model.manifest().inputs) m->inputs.push_back(describe(t));
      for (const kiln::executor::DynamicTensor &t : model.manifest().outputs) m->outputs.push_back(describe(t));
      m->dynamic_inputs.resize(m->inputs.size());
      m->dynamic.emplace(std::move(model));
      return KILN_MODEL_OK;
    }
    kiln::executor::Model model = kiln::executor::Model::load(dir);
    for (size_t i = 0; i < model.input_names().size(); ++i)
      m->inputs.push_back(describe(model.input_names()[i], model.input_types()[i]));
    for (size_t i = 0; i < model.output_names().size(); ++i)
      m->outputs.push_back(describe(model.output_names()[i], model.output_types()[i]));
    m->model.emplace(std::move(model));
    return KILN_MODEL_OK;
  });
}

extern "C" size_t kiln_model_num_inputs(kiln_model model) { return model ? model->inputs.size() : 0; }

extern "C" size_t kiln_model_num_outputs(kiln_model model) { return model ? model->outputs.size() : 0; }

// kiln_model_input_info and kiln_model_output_info: one tensor of `list` described.
static kiln_model_status tensor_info(kiln_model model, const char *function, size_t index,
                                     std::vector<TensorInfo> kiln_model_s::*list, const char *what,
                                     kiln_model_tensor_info *out_info) {
  return guarded(model, function, [&] {
    if (!out_info) return fail(model, KILN_MODEL_INVALID_ARGUMENT, std::string(function) + ": out_info is NULL");
    const std::vector<TensorInfo> &tensors = model->*list;
    kiln_model_status s = check_index(model, function, index, tensors.size(), what);
    if (s == KILN_MODEL_OK) fill(tensors[index], out_info);
    return s;
  });
}

extern "C" kiln_model_status kiln_model_input_info(kiln_model model, size_t index, kiln_model_tensor_info *out_info) {
  return tensor_info(model, "kiln_model_input_info", index, &kiln_model_s::inputs, "input", out_info);
}

extern "C" kiln_model_status kiln_model_output_info(kiln_model model, size_t index, kiln_model_tensor_info *out_info) {
  return tensor_info(model, "kiln_model_output_info", index, &kiln_model_s::outputs, "output", out_info);
}

extern "C" kiln_model_status kiln_model_set_input(kiln_model model, size_t index, const void *data, size_t bytes) {
  if (model && model->dynamic)
    return fail(model, KILN_MODEL_INVALID_ARGUMENT,
                "kiln_model_set_input: the model has dynamic dimensions; give each input's shape with "
                "kiln_model_set_input_shaped");
  return guarded(model, "kiln_model_set_input", [&] {
    kiln_model_status s = check_index(model, "kiln_model_set_input", index, model->inputs.size(), "input");
    if (s != KILN_MODEL_OK) return s;
    const TensorInfo &info = model->inputs[index];
    if (!data) return fail(model, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_set_input: data is NULL");
    if (bytes != info.bytes)
      return fail(model, KILN_MODEL_INVALID_ARGUMENT,
                  "kiln_model_set_input: input '" + info.name + "' takes " + std::to_string(info.bytes) + " bytes, " +
                      std::to_string(bytes) + " given");
    std::memcpy(model->model->input_data(index), data, bytes);
    return KILN_MODEL_OK;
  });
}

extern "C" kiln_model_status kiln_model_run(kiln_model model) {
  return guarded(model, "kiln_model_run", [&] {
    if (model->dynamic) {
      for (size_t i = 0; i < model->dynamic_inputs.size(); ++i)
        if (model->dynamic_inputs[i].shape().empty() && model->dynamic_inputs[i].size() == 0)
          return fail(
              model, KILN_MODEL_INVALID_ARGUMENT,
              "kiln_model_run: input '" + model->inputs[i].name + "' was not set (kiln_model_set_input_shaped)");
      model->dynamic_outputs = model->dynamic->run(model->dynamic_inputs);
      return KILN_MODEL_OK;
    }
    model->model->run();
    return KILN_MODEL_OK;
  });
}

extern "C" kiln_model_status kiln_model_get_output(kiln_model model, size_t index, const void **out_data,
                                                   size_t *out_bytes) {
  return guarded(model, "kiln_model_get_output", [&] {
    if (!out_data || !out_bytes)
      return fail(model, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_get_output: out_data and out_bytes must not be NULL");
    kiln_model_status s = check_index(model, "kiln_model_get_output", index, model->outputs.size(), "output");
    if (s != KILN_MODEL_OK) return s;
    if (model->dynamic) {
      if (model->dynamic_outputs.empty())
        return fail(model, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_get_output: the model has not run yet");
      const kiln::ir::HostTensor &t = model->dynamic_outputs[index];
      *out_data = t.data();
      *out_bytes = static_cast<size_t>(t.size() * kiln::ir::dtype_bytes(t.dtype()));
      return KILN_MODEL_OK;
    }
    *out_data = model->model->output_data(index);
    *out_bytes = model->outputs[index].bytes;
    return KILN_MODEL_OK;
  });
}

extern "C" size_t kiln_model_num_dims(kiln_model model) {
  return model && model->dynamic ? model->dynamic->manifest().dims.size() : 0;
}

extern "C" kiln_model_status kiln_model_dim_info(kiln_model model, size_t index, const char **out_name,
                                                 int64_t *out_min, int64_t *out_max) {
  return guarded(model, "kiln_model_dim_info", [&] {
    if (!out_name || !out_min || !out_max)
      return fail(model, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_dim_info: the out pointers must not be NULL");
    kiln_model_status s = check_index(model, "kiln_model_dim_info", index, kiln_model_num_dims(model), "dimension");
    if (s != KILN_MODEL_OK) return s;
    const kiln::executor::DynamicDim &d = model->dynamic->manifest().dims[index];
    *out_name = d.name.c_str();
    *out_min = d.min;
    *out_max = d.max;
    return KILN_MODEL_OK;
  });
}

extern "C" kiln_model_status kiln_model_set_input_shaped(kiln_model model, size_t index, const void *data, int rank,
                                                         const int64_t *shape, size_t bytes) {
  return guarded(model, "kiln_model_set_input_shaped", [&] {
    const char *function = "kiln_model_set_input_shaped";
    kiln_model_status s = check_index(model, function, index, model->inputs.size(), "input");
    if (s != KILN_MODEL_OK) return s;
    const TensorInfo &info = model->inputs[index];
    if (!data || (rank > 0 && !shape))
      return fail(model, KILN_MODEL_INVALID_ARGUMENT, std::string(function) + ": data or shape is NULL");
    if (rank < 0 || rank > 16)
      return fail(model, KILN_MODEL_INVALID_ARGUMENT,
                  std::string(function) + ": rank " + std::to_string(rank) + " is not a tensor's (0 to 16)");
    std::vector<int64_t> dims(shape, shape + rank);
    int64_t elements = 1;
    for (int64_t d : dims) {
      if (d < 1 || d > (int64_t{1} << 32))
        return fail(model, KILN_MODEL_INVALID_ARGUMENT,
                    std::string(function) + ": input '" + info.name + "' has an extent of " + std::to_string(d));
      elements *= d;
    }
    kiln::ir::DType dtype = kiln::ir::parse_dtype(info.dtype);
    const size_t want = static_cast<size_t>(elements * kiln::ir::dtype_bytes(dtype));
    if (bytes != want)
      return fail(model, KILN_MODEL_INVALID_ARGUMENT,
                  std::string(function) + ": input '" + info.name + "' of that shape takes " + std::to_string(want) +
                      " bytes, " + std::to_string(bytes) + " given");
    if (!model->dynamic) {
      if (dims != info.shape)
        return fail(model, KILN_MODEL_INVALID_ARGUMENT,
                    std::string(function) + ": input '" + info.name + "' has a fixed shape; this one differs");
      std::memcpy(model->model->input_data(index), data, bytes);
      return KILN_MODEL_OK;
    }
    kiln::ir::HostTensor t(dtype, dims);
    std::memcpy(t.data(), data, bytes);
    model->dynamic_inputs[index] = std::move(t);
    return KILN_MODEL_OK;
  });
}

extern "C" kiln_model_status kiln_model_output_shape(kiln_model model, size_t index, int *out_rank,
                                                     const int64_t **out_shape) {
  return guarded(model, "kiln_model_output_shape", [&] {
    if (!out_rank || !out_shape)
      return fail(model, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_output_shape: the out pointers must not be NULL");
    kiln_model_status s = check_index(model, "kiln_model_output_shape", index, model->outputs.size(), "output");
    if (s != KILN_MODEL_OK) return s;
    if (model->dynamic) {
      if (model->dynamic_outputs.empty())
        return fail(model, KILN_MODEL_INVALID_ARGUMENT, "kiln_model_output_shape: the model has not run yet");
      const std::vector<int64_t> &shape = model->dynamic_outputs[index].shape();
      *out_rank = static_cast<int>(shape.size());
      *out_shape = shape.data();
      return KILN_MODEL_OK;
    }
    *out_rank = static_cast<int>(model->outputs[index].shape.size());
    *out_shape = model->outputs[index].shape.data();
    return KILN_MODEL_OK;
  });
}

extern "C" kiln_model_status kiln_model_set_threads(int threads) {
  if (threads < 1) return KILN_MODEL_INVALID_ARGUMENT;
  kiln::executor::Model::set_threads(threads);
  return KILN_MODEL_OK;
}

extern "C" const char *kiln_model_last_error(kiln_model model) {
  if (!model) return "kiln_model handle is NULL (kiln_model_load ran out of memory, or the handle was freed)";
  return model->last_error.c_str();
}

extern "C" void kiln_model_free(kiln_model *model) {
  if (!model || !*model) return;
  delete *model;
  *model = nullptr;
}

extern "C" int kiln_model_library_api_version(void) { return KILN_MODEL_API_VERSION; }
