// Models compiled for a GPU: every step a CUDA artifact (PTX, and a cubin where ptxas
// is installed) wired to the model's buffers, and the folder's steps, run as the GPU
// would run their kernels (the thread-by-thread interpreter on the same schedules, the
// weights read from weights.bin at the manifest's offsets), give the exporter's output.
// Where a GPU is present the compiled model itself runs on it; elsewhere loading says
// why it cannot.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/cuda.h"
#include "device/cuda_artifact.h"
#include "device/cuda_driver.h"
#include "executor/compile.h"
#include "executor/model.h"
#include "frontend/onnx_import.h"
#include "frontend/pipeline.h"
#include "ir/gpu_lower.h"
#include "ir/interpreter.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::executor {
namespace {

const char *const kTarget = "cuda -arch=sm_90";

std::filesystem::path scratch_dir() {
  static std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("kiln_gpu_model_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

struct RemoveScratch : ::testing::Environment {
  void TearDown() override { std::filesystem::remove_all(scratch_dir()); }
};
const auto *const kCleanup = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

std::string read_file(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ir::HostTensor read_tensor(const std::filesystem::path &path, const ir::TensorType &type) {
  std::string bytes = read_file(path);
  ir::HostTensor t(type.dtype, type.shape);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), t.size() * ir::dtype_bytes(type.dtype)) << path;
  std::memcpy(t.data(), bytes.data(), std::min<size_t>(bytes.size(), static_cast<size_t>(t.size()) * 4));
  return t;
}

ir::TensorType type_of(const nlohmann::json &value) {
  return {value.at("shape").get<std::vector<int64_t>>(), ir::parse_dtype(value.at("dtype").get<std::string>())};
}

// The compiled folder run step by step as its manifest says, each step's kernels (the
// same untuned GPU schedule kiln compile built them from) in the GPU interpreter.
std::vector<ir::HostTensor> interpret_folder(const std::filesystem::path &dir, const frontend::PreparedModel &model,
                                             const std::vector<ir::HostTensor> &inputs) {
  const nlohmann::json m = nlohmann::json::parse(read_file(dir / "model.json"));
  const std::string weights = read_file(dir / "weights.bin");
  const Target target = Target::parse(kTarget);
  std::map<size_t, ir::HostTensor> values;
  const nlohmann::json &manifest_values = m.at("values");
  for (size_t i = 0; i < manifest_values.size(); ++i) {
    const nlohmann::json &v = manifest_values[i];
    if (!v.contains("offset")) continue;
    ir::HostTensor t(type_of(v).dtype, type_of(v).shape);
    std::memcpy(t.data(), weights.data() + v.at("offset").get<int64_t>(),
                static_cast<size_t>(t.size() * ir::dtype_bytes(t.dtype())));
    values.emplace(i, std::move(t));
  }
  for (size_t k = 0; k < inputs.size(); ++k) values.emplace(m.at("inputs")[k].get<size_t>(), inputs[k]);
  // A reshape between steps is a view: the same bytes under the output's shape.
  auto view_or_value = [&](size_t id) -> ir::HostTensor & {
    if (auto it = values.find(id); it != values.end()) return it->second;
    for (const frontend::Subgraph &s : model.subgraphs) {
      if (static_cast<size_t>(s.output) != id || s.inputs.size() != 1) continue;
      const ir::HostTensor &from = values.at(static_cast<size_t>(s.inputs[0]));
      ir::HostTensor t(type_of(manifest_values[id]).dtype, type_of(manifest_values[id]).shape);
      std::memcpy(t.data(), from.data(), static_cast<size_t>(t.size() * ir::dtype_bytes(t.dtype())));
      return values.emplace(id, std::move(t)).first->second;
    }
    ADD_FAILURE() << "value " << id << " is read before any step writes it";
    return values.emplace(id, ir::HostTensor(ir::DType::kFloat32, {1})).first->second;
  };
  for (const nlohmann::json &step : m.at("steps")) {
    const std::string artifact = step.at("artifact");
    const size_t index = std::stoul(artifact.substr(2));  // "sgK.cuda.json": subgraph K
    const frontend::Subgraph &s = model.subgraphs.at(index);
    ir::PrimFunc func = search::untuned_schedule(te::lower(s.workload.build_dag(), artifact), target);
    ir::GpuProgram program = ir::lower_for_gpu(func, codegen::gpu_limits(target));
    std::vector<ir::HostTensor *> args;
    const std::vector<size_t> ids = step.at("args").get<std::vector<size_t>>();
    for (size_t k = 0; k + 1 < ids.size(); ++k) args.push_back(&view_or_value(ids[k]));
    const nlohmann::json &out = manifest_values[ids.back()];
    ir::HostTensor &output =
        values.insert_or_assign(ids.back(), ir::HostTensor(type_of(out).dtype, type_of(out).shape)).first->second;
    args.push_back(&output);
    ir::interpret_gpu(program, args);
  }
  std::vector<ir::HostTensor> outputs;
  for (const nlohmann::json &o : m.at("outputs")) outputs.push_back(view_or_value(o.get<size_t>()));
  return outputs;
}

class GpuModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModel, StepsAreCudaKernelsThatComputeTheModel) {
  const std::string name = GetParam();
  const std::string models = KILN_FRONTEND_MODELS;
  frontend::PreparedModel model = frontend::prepare(frontend::import_onnx_file(models + "/" + name + ".onnx"),
                                                    {frontend::ImageLayout::kNCHW, false, true});
  const std::filesystem::path dir = scratch_dir() / (name + ".kiln");
  CompileReport report = compile_model(model, {kTarget, "", search::untuned_schedule, {}}, dir.string());
  EXPECT_EQ(report.untuned + report.views, model.subgraphs.size());

  const nlohmann::json m = nlohmann::json::parse(read_file(dir / "model.json"));
  EXPECT_EQ(m.at("device"), "cuda");
  EXPECT_EQ(m.at("arch"), "sm_90");
  EXPECT_EQ(m.at("steps").size(), model.subgraphs.size() - report.views);
  const bool assembled = !codegen::find_ptxas().empty();
  for (const nlohmann::json &step : m.at("steps")) {
    const std::string artifact = step.at("artifact");
    ASSERT_TRUE(artifact.size() > 10 && artifact.substr(artifact.size() - 10) == ".cuda.json") << artifact;
    device::CudaArtifact a = device::read_cuda_artifact((dir / artifact).string());
    EXPECT_EQ(a.arch, "sm_90");
    EXPECT_FALSE(a.launches.empty()) << artifact;
    EXPECT_EQ(a.cubin.empty(), !assembled) << artifact << ": ptxas assembles every step where it is installed";
    // The kernels take the step's buffers first, in its order, then their scratch.
    const std::vector<size_t> args = step.at("args").get<std::vector<size_t>>();
    ASSERT_GE(a.buffers.size(), args.size()) << artifact;
    for (size_t k = 0; k < a.buffers.size(); ++k) {
      if (k >= args.size()) {
        EXPECT_EQ(a.buffers[k].role, "scratch") << artifact;
        continue;
      }
      const ir::TensorType want = type_of(m.at("values")[args[k]]);
      EXPECT_EQ(a.buffers[k].shape, want.shape) << artifact << " buffer " << k;
      EXPECT_EQ(a.buffers[k].dtype, want.dtype) << artifact << " buffer " << k;
      EXPECT_EQ(a.buffers[k].role, k + 1 == args.size() ? "output" : "input") << artifact << " buffer " << k;
    }
  }

  const ir::TensorType input_type = type_of(m.at("values")[m.at("inputs")[0].get<size_t>()]);
  const ir::TensorType output_type = type_of(m.at("values")[m.at("outputs")[0].get<size_t>()]);
  ir::HostTensor input = read_tensor(models + "/" + name + ".input.bin", input_type);
  ir::HostTensor want = read_tensor(models + "/" + name + ".ref.bin", output_type);
  EXPECT_LE(ir::relative_l2_error(interpret_folder(dir, model, {input}).at(0), want), 1e-4) << name;

  // The compiled model itself: on the GPU where there is one, else a clear refusal.
  std::string why;
  if (device::CudaDriver::open(0, &why)) {
    Model loaded = Model::load(dir.string());
    EXPECT_FALSE(loaded.gpu_name().empty());
    EXPECT_LE(ir::relative_l2_error(loaded.run({input}).at(0), want), 1e-4) << name << " on " << loaded.gpu_name();
    EXPECT_EQ(loaded.profile_steps({input}, 2).size(), loaded.num_steps());
  } else {
    try {
      Model::load(dir.string());
      ADD_FAILURE() << "a GPU model loaded on a host without a GPU";
    } catch (const ModelError &e) {
      EXPECT_NE(std::string(e.what()).find("compiled for a GPU (sm_90) and none can run it here"), std::string::npos)
          << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuModel, ::testing::Values("tiny_cnn", "mlp", "bert_tiny"));

}  // namespace
}  // namespace kiln::executor
