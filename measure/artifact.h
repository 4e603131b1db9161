// A loaded artifact (codegen/runtime/abi.h): the entry point and the parameter list read from
// its kiln_artifact_info JSON. Only ever loaded in a throw-away child process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/runtime/abi.h"
#include "ir/dtype.h"

namespace kiln::measure::detail {

struct ParamSpec {
  std::string name;
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<int64_t> shape;
  /// "input" / "output" when the artifact says so; empty otherwise.
  std::string role;

  int64_t num_elements() const;
  int64_t num_bytes() const;
  /// "float32[64, 32]"
  std::string type_string() const;
  bool operator==(const ParamSpec &other) const { return dtype == other.dtype && shape == other.shape; }
};

/// A parameter kiln_entry reads in a layout packed ahead of time (ABI version 2).
struct PackedParam {
  size_t index = 0;  ///< its position among the params
  ParamSpec layout;  ///< the packed buffer kiln_entry takes there
};

/// Parses the "params" of kiln_artifact_info; throws std::runtime_error naming the
/// offending field. A packed param is described by the tensor it is packed from (what
/// a caller supplies, and what the reference has), and added to `packed` when given.
std::vector<ParamSpec> parse_params(const nlohmann::json &info, std::vector<PackedParam> *packed = nullptr);
nlohmann::json params_to_json(const std::vector<ParamSpec> &params);

/// "output 'C' (param 2)" or "param 2 'C'" when the artifact gives no roles.
std::string param_label(const std::vector<ParamSpec> &params, size_t index);

struct LoadedArtifact {
  kiln_entry_fn entry = nullptr;
  std::vector<ParamSpec> params;
  /// kiln_prepack and the params it packs; none for version-1 artifacts.
  kiln_entry_fn prepack = nullptr;
  std::vector<PackedParam> packed;
};

/// dlopen(RTLD_NOW | RTLD_LOCAL) + symbol lookup + info parsing. The library is never
/// closed: the process is thrown away after one candidate. Throws std::runtime_error
/// with a message fit for a load_error record.
LoadedArtifact load_artifact(const std::string &path);

}  // namespace kiln::measure::detail
