// A compiled model's dynamic.json (kiln run, kiln bench, kiln_model_load on a model
// compiled with --dim NAME=MIN..MAX): any bytes either load or are refused with a
// ModelError, and a loaded manifest has a bucket for every corner of its ranges, shapes
// without negative extents, pieces that hold a call's rows, and reads back as itself. No bucket folder exists, so
// loading a bucket is refused too.
#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "executor/dynamic_model.h"
#include "executor/model.h"
#include "tests/fuzz/fuzz_helpers.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

const kiln::testing::ScratchFolder scratch("kiln_dynamic_manifest_fuzz");
using kiln::testing::require;

}  // namespace

KILN_FUZZ_TARGET(dynamic_manifest) {
  std::filesystem::path dir = scratch.path() / "model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "dynamic.json", std::ios::binary | std::ios::trunc) << input;
  std::optional<kiln::executor::DynamicModel> model;
  try {
    model.emplace(kiln::executor::DynamicModel::load(dir.string()));
  } catch (const kiln::executor::ModelError &) {
    return;
  }
  const kiln::executor::DynamicManifest &m = model->manifest();
  require(!m.dims.empty() && !m.buckets.empty(), "a manifest without dimensions or buckets");
  // Every corner of the ranges has a bucket that holds it, with shapes that fit.
  for (size_t corner = 0; corner < (size_t{1} << std::min<size_t>(m.dims.size(), 4)); ++corner) {
    std::vector<int64_t> values;
    for (size_t d = 0; d < m.dims.size(); ++d) values.push_back(corner >> d & 1 ? m.dims[d].max : m.dims[d].min);
    size_t b = model->bucket_of(values);
    for (size_t d = 0; d < values.size(); ++d) require(m.buckets.at(b)[d] >= values[d], "a bucket too small");
    for (const auto *tensors : {&m.inputs, &m.outputs})
      for (const kiln::executor::DynamicTensor &t : *tensors)
        for (int64_t extent : kiln::executor::DynamicManifest::shape_at(t, m.buckets[b]))
          require(extent >= 0, "a negative extent");
    require(!m.bucket_folder(b).empty(), "a bucket without a folder name");
  }
  // A call's pieces hold its rows exactly, each in a bucket that fits it.
  if (m.dims.size() == 1)
    for (int64_t n = m.dims[0].min; n <= std::min(m.dims[0].max, m.dims[0].min + 64); ++n) {
      int64_t covered = 0;
      for (const kiln::executor::DynamicPiece &p : model->pieces_of({n})) {
        require(p.offset == covered && p.rows > 0 && p.rows <= m.buckets.at(p.bucket)[0], "a piece out of place");
        covered += p.rows;
      }
      require(covered == n, "pieces that do not hold the call's rows");
    }
  require(kiln::executor::DynamicManifest::from_json(m.to_json()).to_json() == m.to_json(),
          "the manifest does not read back as itself");
  try {
    (void)model->bucket(0);
    throw std::logic_error("a bucket loaded from a folder that does not exist");
  } catch (const kiln::executor::ModelError &) {
  }
}
