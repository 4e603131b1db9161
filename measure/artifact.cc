#include "measure/artifact.h"
#include "support/json_read.h"

#include <dlfcn.h>

#include <stdexcept>

namespace kiln::measure::detail {

int64_t ParamSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

int64_t ParamSpec::num_bytes() const { return num_elements() * ir::dtype_bytes(dtype); }

std::string ParamSpec::type_string() const {
  std::string text = std::string(ir::dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

static ParamSpec parse_spec(const nlohmann::json &p) {
  ParamSpec spec;
  spec.name = p.value("name", "");
  spec.dtype = ir::parse_dtype(p.at("dtype").get<std::string>());
  spec.shape = p.at("shape").get<std::vector<int64_t>>();
  for (int64_t extent : spec.shape) {
    if (extent < 0) throw std::runtime_error("negative extent");
  }
  spec.role = p.value("role", "");
  return spec;
}

std::vector<ParamSpec> parse_params(const nlohmann::json &info, std::vector<PackedParam> *packed) {
  if (!info.is_object()) throw std::runtime_error("kiln_artifact_info is not a JSON object");
  const nlohmann::json *abi = info.contains("kiln_abi") ? &info["kiln_abi"] : nullptr;
  if (!abi || !abi->is_number_integer() || *abi < 1 || *abi > KILN_ABI_VERSION) {
    throw std::runtime_error("kiln_artifact_info has kiln_abi " + (abi ? abi->dump() : std::string("missing")) +
                             "; this runner speaks versions 1 to " + std::to_string(KILN_ABI_VERSION));
  }
  if (!info.contains("params") || !info["params"].is_array()) {
    throw std::runtime_error("kiln_artifact_info has no \"params\" array");
  }
  std::vector<ParamSpec> params;
  for (const nlohmann::json &p : info["params"]) {
    size_t index = params.size();
    try {
      ParamSpec spec = parse_spec(p);
      if (p.contains("packed_from")) {
        if (spec.role != "input") throw std::runtime_error("only inputs can be packed");
        ParamSpec original = parse_spec(p.at("packed_from"));
        original.role = spec.role;
        if (packed) packed->push_back(PackedParam{index, std::move(spec)});
        spec = std::move(original);
      }
      params.push_back(std::move(spec));
    } catch (const std::exception &e) {
      throw std::runtime_error("kiln_artifact_info param " + std::to_string(index) + " " + p.dump() +
                               " is malformed: " + e.what());
    }
  }
  return params;
}

nlohmann::json params_to_json(const std::vector<ParamSpec> &params) {
  nlohmann::json list = nlohmann::json::array();
  for (const ParamSpec &p : params) {
    nlohmann::json j = {{"name", p.name}, {"dtype", ir::dtype_name(p.dtype)}, {"shape", p.shape}};
    if (!p.role.empty()) j["role"] = p.role;
    list.push_back(std::move(j));
  }
  return {{"kiln_abi", 1}, {"params", std::move(list)}};
}

std::string param_label(const std::vector<ParamSpec> &params, size_t index) {
  const ParamSpec &p = params.at(index);
  if (!p.role.empty()) return p.role + " '" + p.name + "' (param " + std::to_string(index) + ")";
  return "param " + std::to_string(index) + " '" + p.name + "'";
}

LoadedArtifact load_artifact(const std::string &path) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char *why = dlerror();
    throw std::runtime_error("cannot load artifact: " + std::string(why ? why : path));
  }
  LoadedArtifact artifact;
  artifact.entry = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_ENTRY_SYMBOL));
  if (artifact.entry == nullptr) {
    throw std::runtime_error("artifact " + path + " does not export " KILN_ENTRY_SYMBOL);
  }
  const char *info = static_cast<const char *>(dlsym(handle, KILN_INFO_SYMBOL));
  if (info == nullptr) {
    throw std::runtime_error("artifact " + path + " does not export " KILN_INFO_SYMBOL);
  }
  nlohmann::json parsed = kiln::support::parse_json_or_discarded(info);
  if (parsed.is_discarded()) {
    throw std::runtime_error("artifact " + path + ": " KILN_INFO_SYMBOL " is not valid JSON");
  }
  try {
    artifact.params = parse_params(parsed, &artifact.packed);
  } catch (const std::exception &e) {
    throw std::runtime_error("artifact " + path + ": " + e.what());
  }
  if (!artifact.packed.empty()) {
    artifact.prepack = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_PREPACK_SYMBOL));
    if (artifact.prepack == nullptr)
      throw std::runtime_error("artifact " + path + " has packed params but does not export " KILN_PREPACK_SYMBOL);
  }
  return artifact;
}

}  // namespace kiln::measure::detail
