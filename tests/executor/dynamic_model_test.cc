// A compiled model with a dynamic sequence length: one folder of buckets that runs every
// length the model has positions for (1..32) like the model imported at that length,
// refuses lengths outside the range, and runs different buckets for different lengths;
// and one with a dynamic batch, whose calls run as pieces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "executor/compile.h"
#include "executor/dynamic_model.h"
#include "frontend/dynamic_shapes.h"
#include "frontend/onnx_import.h"
#include "frontend/reference.h"
#include "search/space.h"

namespace kiln::executor {
namespace {

std::string bert_path() { return std::string(KILN_FRONTEND_MODELS) + "/bert_ids_dynamic.onnx"; }

frontend::Graph import_bert(int64_t sequence) {
  frontend::ImportOptions options;
  options.dim_values = {{"batch", 1}, {"sequence", sequence}};
  return frontend::import_onnx_file(bert_path(), options);
}

DynamicTensor tensor_of(const frontend::SymbolicGraph &s, frontend::ValueId v) {
  const frontend::Value &value = s.at_max.values[static_cast<size_t>(v)];
  DynamicTensor t{value.name, value.type.dtype, {}};
  for (size_t a = 0; a < value.type.shape.size(); ++a) {
    const frontend::SymbolicAxis &sa = s.axes[static_cast<size_t>(v)][a];
    t.axes.push_back(sa.is_symbolic() ? DynamicAxis{0, sa.symbol, sa.scale} : DynamicAxis{value.type.shape[a], -1, 1});
  }
  return t;
}

// The dynamic model on random inputs of `exact`'s shapes (token ids below 20) gives
// what the reference interpreter gives on `exact`, the model imported at those shapes.
void expect_runs_like(DynamicModel &model, const frontend::Graph &exact, std::mt19937_64 &rng, const std::string &at) {
  std::vector<ir::HostTensor> inputs;
  for (frontend::ValueId in : exact.inputs) {
    const frontend::Value &v = exact.values[static_cast<size_t>(in)];
    ir::HostTensor t(v.type.dtype, v.type.shape);
    t.fill_random(rng, 0, v.name == "input_ids" ? 20 : 1);
    inputs.push_back(std::move(t));
  }
  std::vector<ir::HostTensor> want = frontend::evaluate_reference(exact, inputs);
  std::vector<ir::HostTensor> got = model.run(inputs);
  ASSERT_EQ(got.size(), want.size()) << at;
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].shape(), want[o].shape()) << at;
    EXPECT_LE(ir::relative_l2_error(got[o], want[o]), 1e-4) << at << ", output " << o;
  }
}

class DynamicModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("kiln_dynamic_model_test_" + std::to_string(getpid()));
    frontend::DimRange range = frontend::parse_dim_range("sequence=1..32");
    symbolic_ = new frontend::SymbolicGraph(frontend::find_symbolic_axes(
        [](const std::vector<int64_t> &values) { return import_bert(values.at(0)); }, {range}));
    DynamicManifest m;
    m.dims.push_back({range.name, range.min, range.max});
    for (frontend::ValueId in : symbolic_->at_max.inputs) m.inputs.push_back(tensor_of(*symbolic_, in));
    for (frontend::ValueId out : symbolic_->at_max.outputs) m.outputs.push_back(tensor_of(*symbolic_, out));
    for (int64_t b : frontend::choose_buckets(range, 4)) m.buckets.push_back({b});
    CompileOptions options{"llvm -num-cores=2", "", search::untuned_schedule, {}};
    compile_dynamic_model(
        m,
        [&](size_t i) {
          int64_t b = m.buckets[i][0];
          return frontend::prepare(frontend::bucket_graph(import_bert(b), *symbolic_, {b}), {});
        },
        options, dir_.string());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(dir_);
    delete symbolic_;
  }

  static std::filesystem::path dir_;
  static frontend::SymbolicGraph *symbolic_;
};

std::filesystem::path DynamicModelTest::dir_;
frontend::SymbolicGraph *DynamicModelTest::symbolic_ = nullptr;

TEST_F(DynamicModelTest, EveryLengthInTheRangeMatchesTheModelAtThatLength) {
  ASSERT_TRUE(is_dynamic_model(dir_.string()));
  DynamicModel model = DynamicModel::load(dir_.string());
  ASSERT_EQ(model.manifest().buckets.size(), 4u);
  std::mt19937_64 rng(7);
  for (int64_t n = 1; n <= 32; ++n) expect_runs_like(model, import_bert(n), rng, "length " + std::to_string(n));
}

TEST_F(DynamicModelTest, LengthsRunTheSmallestBucketThatHoldsThem) {
  DynamicModel model = DynamicModel::load(dir_.string());
  std::set<size_t> used;
  for (int64_t n = 1; n <= 32; ++n) {
    size_t b = model.bucket_of({n});
    EXPECT_GE(model.manifest().buckets[b][0], n);
    for (const std::vector<int64_t> &other : model.manifest().buckets)
      if (other[0] >= n) EXPECT_LE(model.manifest().buckets[b][0], other[0]);
    used.insert(b);
  }
  EXPECT_EQ(used.size(), 4u);
  EXPECT_EQ(model.bucket_of({32}), model.manifest().buckets.size() - 1);
}

TEST_F(DynamicModelTest, ShapesOutsideTheRangeOrInDisagreementAreRefused) {
  DynamicModel model = DynamicModel::load(dir_.string());
  auto error_of = [&](const std::vector<ir::HostTensor> &inputs) {
    try {
      model.run(inputs);
    } catch (const ModelError &e) {
      return std::string(e.what());
    }
    return std::string("<ran>");
  };
  auto ids = [](int64_t n) {
    ir::HostTensor t(ir::DType::kInt64, {1, n});
    t.fill(1);
    return t;
  };
  std::string e = error_of({ids(33), ids(33), ids(33)});
  EXPECT_NE(e.find("'sequence' = 33 (the model takes 1..32) is outside the range"), std::string::npos) << e;
  e = error_of({ids(4), ids(5), ids(4)});
  EXPECT_NE(e.find("disagree on the dimension 'sequence' (4 and 5)"), std::string::npos) << e;
  ir::HostTensor two_rows(ir::DType::kInt64, {2, 4});
  two_rows.fill(1);
  e = error_of({two_rows, ids(4), ids(4)});
  EXPECT_NE(e.find("input 'input_ids' has extent 2 along axis 0; the model takes 1 there"), std::string::npos) << e;
  e = error_of({ids(4), ids(4)});
  EXPECT_NE(e.find("the model takes 3 inputs, 2 were given"), std::string::npos) << e;
}

// dynamic.json is checked against each bucket's model.json before the bucket runs: an
// output scale raised (read past a buffer), an input's dtype changed (read out of
// bounds), an output renamed: each refused with what disagrees, nothing run.
TEST_F(DynamicModelTest, AnEditedManifestIsRefusedBeforeAnythingRuns) {
  auto edited_error = [&](const std::function<void(nlohmann::json &)> &edit) {
    std::filesystem::path copy = dir_.string() + "_edited";
    std::filesystem::remove_all(copy);
    std::filesystem::copy(dir_, copy, std::filesystem::copy_options::recursive);
    nlohmann::json j;
    {
      std::ifstream in(copy / "dynamic.json");
      j = nlohmann::json::parse(in);
    }
    edit(j);
    std::ofstream(copy / "dynamic.json") << j.dump();
    std::string error = "<ran>";
    try {
      DynamicModel model = DynamicModel::load(copy.string());
      // Inputs as the (edited) manifest describes them, as `kiln run` converts them.
      std::vector<ir::HostTensor> inputs;
      for (const DynamicTensor &t : model.manifest().inputs) {
        inputs.emplace_back(t.dtype, DynamicManifest::shape_at(t, {5}));
        inputs.back().fill(1);
      }
      model.run(inputs);
    } catch (const ModelError &e) {
      error = e.what();
    }
    std::filesystem::remove_all(copy);
    return error;
  };
  auto scaled_axis = [](nlohmann::json &tensor) -> nlohmann::json & {
    for (nlohmann::json &axis : tensor["axes"])
      if (axis.contains("scale")) return axis;
    throw std::runtime_error("no dynamic axis");
  };
  std::string e = edited_error([&](nlohmann::json &j) { scaled_axis(j["outputs"][0])["scale"] = 2; });
  EXPECT_NE(e.find("dynamic.json says output"), std::string::npos) << e;
  EXPECT_NE(e.find("but the bucket's model.json has"), std::string::npos) << e;
  EXPECT_NE(e.find("compile the model again"), std::string::npos) << e;
  e = edited_error([&](nlohmann::json &j) { j["inputs"][0]["dtype"] = "float32"; });
  EXPECT_NE(e.find("dynamic.json says input"), std::string::npos) << e;
  EXPECT_NE(e.find("is float32 [1x"), std::string::npos) << e;
  e = edited_error([&](nlohmann::json &j) { j["outputs"][0]["name"] = "renamed"; });
  EXPECT_NE(e.find("dynamic.json says 'renamed'"), std::string::npos) << e;
  e = edited_error([&](nlohmann::json &j) { j["dims"][0]["min"] = 0; });
  EXPECT_NE(e.find("dimension 'sequence' ranges over 0..32, below 1"), std::string::npos) << e;
  EXPECT_EQ(edited_error([](nlohmann::json &) {}), "<ran>");
}

// A dynamic batch: BERT's samples never meet, so a call of 5 runs the buckets of 4 and 1
// on its rows instead of padding to 6, and every batch size matches the model imported
// at that size.
TEST(DynamicModelSplit, EveryBatchRunsAsPiecesAndMatchesTheModelAtThatSize) {
  auto import_batch = [](int64_t batch) {
    frontend::ImportOptions options;
    options.dim_values = {{"batch", batch}, {"sequence", 8}};
    return frontend::import_onnx_file(bert_path(), options);
  };
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_dynamic_split_test_" + std::to_string(getpid()));
  frontend::DimRange range = frontend::parse_dim_range("batch=1..6");
  frontend::SymbolicGraph symbolic = frontend::find_symbolic_axes(
      [&](const std::vector<int64_t> &values) { return import_batch(values.at(0)); }, {range});
  ASSERT_EQ(frontend::rows_interact(symbolic, 0), "");
  DynamicManifest m;
  m.dims.push_back({range.name, range.min, range.max, 2});
  for (frontend::ValueId in : symbolic.at_max.inputs) m.inputs.push_back(tensor_of(symbolic, in));
  for (frontend::ValueId out : symbolic.at_max.outputs) m.outputs.push_back(tensor_of(symbolic, out));
  for (int64_t b : frontend::choose_split_buckets(range, 8)) m.buckets.push_back({b});
  CompileOptions options{"llvm -num-cores=2", "", search::untuned_schedule, {}};
  compile_dynamic_model(
      m,
      [&](size_t i) {
        int64_t b = m.buckets[i][0];
        return frontend::prepare(frontend::bucket_graph(import_batch(b), symbolic, {b}), {});
      },
      options, dir.string());
  DynamicModel model = DynamicModel::load(dir.string());
  ASSERT_EQ(model.manifest().dims.at(0).max_pieces, 2);
  std::vector<DynamicPiece> five = model.pieces_of({5});
  ASSERT_EQ(five.size(), 2u);
  EXPECT_EQ(model.manifest().buckets[five[0].bucket][0], 4);
  EXPECT_EQ(five[0].rows, 4);
  EXPECT_EQ(five[1].offset, 4);
  EXPECT_EQ(model.manifest().buckets[five[1].bucket][0], 1);
  EXPECT_EQ(model.pieces_of({6}).size(), 1u);
  std::mt19937_64 rng(11);
  for (int64_t n = 1; n <= 6; ++n) expect_runs_like(model, import_batch(n), rng, "batch " + std::to_string(n));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::executor
