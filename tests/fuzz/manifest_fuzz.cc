// Compiled models' manifests (model.json, read by kiln run, kiln bench and
// kiln_model_load): any bytes as model.json beside a 64-byte weights.bin either load or
// are refused with a ModelError. No artifact is ever opened: the manifest would have to
// name a file of the folder by its SHA-256, and the only other file is weights.bin.
// Manifests whose arena is larger than 64 MiB are not loaded: the loader allocates the
// arena a manifest asks for (as a real model's must be), and libFuzzer counts large
// allocations as findings; every other size is checked against what backs it.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "executor/model.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

const std::filesystem::path &model_folder() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("kiln_manifest_fuzz_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::ofstream(d / "weights.bin", std::ios::binary) << std::string(64, '\1');
    return d;
  }();
  return dir;
}

struct RemoveFolder {
  ~RemoveFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(model_folder(), ignored);
  }
} remove_folder_at_exit;

}  // namespace

KILN_FUZZ_TARGET(model_manifest) {
  nlohmann::json j = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("arena_bytes") && j["arena_bytes"].is_number() &&
      !(j["arena_bytes"].get<double>() <= double(int64_t{64} << 20)))
    return;
  std::ofstream(model_folder() / "model.json", std::ios::binary | std::ios::trunc) << input;
  try {
    kiln::executor::Model model = kiln::executor::Model::load(model_folder().string());
    (void)model;
  } catch (const kiln::executor::ModelError &) {
  }
}
