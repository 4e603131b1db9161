// CUDA artifacts and their measurement: the file codegen writes is read back as it was
// meant; damaged files are refused with the reason; kiln-cuda-measure says clearly when
// there is no GPU; and where there is one, hand-scheduled programs run on it and agree
// with the interpreter (GpuDevice.*, ctest label `gpu`, one skip line without a GPU).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <fstream>
#include <random>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "device/cuda_artifact.h"
#include "device/cuda_driver.h"
#include "ir/interpreter.h"
#include "ir/schedule/schedule.h"
#include "measure/cuda_runner.h"
#include "measure/local_builder_pool.h"
#include "ops/workload.h"
#include "te/te.h"
#include "tests/common/gpu_schedules.h"

namespace kiln::measure {
namespace {

using device::CudaArtifact;
using device::CudaDriver;
using device::CudaMeasurement;
using device::CudaTimingOptions;
using device::parse_cuda_artifact;
using device::read_cuda_artifact;
using ir::DType;
using ops::Workload;

ir::PrimFunc lower(const Workload &w, const std::string &name) { return te::lower(w.build_dag(), name); }

codegen::CudaModule gemm_module(int64_t m, int64_t n, int64_t k, ir::PrimFunc *func = nullptr) {
  ir::PrimFunc f = lower(Workload::single("matmul", {{{m, k}, DType::kFloat32}, {{k, n}, DType::kFloat32}}), "mm");
  if (func) *func = f;
  ir::Schedule sch(f);
  test_support::schedule_gemm_shared_tiles(sch, "matmul", test_support::GemmTiles{32, 32, 8, 4, 4, 2});
  static codegen::Compiler compiler;
  return compiler.build_cuda(sch.func(), Target::parse("cuda -arch=sm_80"));
}

std::string refusal(const std::string &text) {
  try {
    parse_cuda_artifact(text);
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "";
}

TEST(CudaArtifact, ReadsBackWhatCodegenWritesAndRefusesDamage) {
  codegen::CudaModule m = gemm_module(64, 64, 32);
  CudaArtifact a = parse_cuda_artifact(m.artifact_text());
  EXPECT_EQ(a.name, "mm");
  EXPECT_EQ(a.arch, "sm_80");
  EXPECT_EQ(a.ptx_isa, "7.0");
  EXPECT_EQ(a.ptx, m.ptx);
  ASSERT_EQ(a.buffers.size(), 3u);
  EXPECT_EQ(a.buffers[0].shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(a.buffers[2].role, "output");
  EXPECT_EQ(a.buffers[2].bytes(), 64 * 64 * 4);
  ASSERT_EQ(a.launches.size(), 1u);
  EXPECT_EQ(a.launches[0].grid, (std::array<int64_t, 3>{2, 2, 1}));
  EXPECT_EQ(a.launches[0].block, (std::array<int64_t, 3>{8, 8, 1}));

  nlohmann::json good = nlohmann::json::parse(m.artifact_text());
  auto damaged = [&](const std::function<void(nlohmann::json &)> &damage) {
    nlohmann::json j = good;
    damage(j);
    return refusal(j.dump());
  };
  EXPECT_NE(refusal("{not json").find("not a JSON object"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["kiln_cuda_artifact"] = 9; }).find("format version 9"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j.erase("ptx"); }).find("no \"ptx\""), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["buffers"][0]["role"] = "weights"; }).find("role 'weights'"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["buffers"][0]["dtype"] = "float128"; }).find("float128"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["buffers"][0]["shape"][0] = -3; }).find("must be in [1"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["launches"][0]["block"] = {2048, 1, 1}; }).find("block"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["launches"][0]["name"] = "other"; }).find("names no kernel of the PTX"),
            std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["launches"] = nlohmann::json::array(); }).find("no launches"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["cubin_hex"] = "abc"; }).find("even number"), std::string::npos);
  EXPECT_NE(damaged([](auto &j) {
              j["cubin_hex"] = "zz";
              j["cubin_toolkit"] = "13.0";
            }).find("'z'"),
            std::string::npos);
  EXPECT_NE(damaged([](auto &j) { j["cubin_hex"] = "7f45"; }).find("cubin_toolkit"), std::string::npos);
}

TEST(CudaMeasure, TheToolSaysClearlyWhenThereIsNoGpu) {
  std::string path = ::testing::TempDir() + "/mm.cuda.json";
  std::ofstream(path) << gemm_module(64, 64, 32).artifact_text();
  std::string log = ::testing::TempDir() + "/measure.log";
  std::string command = std::string(KILN_CUDA_MEASURE) + " " + path + " --repeats 2 > " + log + " 2>&1";
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string why;
  if (CudaDriver::open(0, &why)) {
    EXPECT_EQ(WEXITSTATUS(status), 0) << output;
    EXPECT_NE(output.find("\"median_seconds\""), std::string::npos) << output;
  } else {
    EXPECT_EQ(WEXITSTATUS(status), 3) << output;
    EXPECT_NE(output.find("cannot measure on a GPU here"), std::string::npos) << output;
  }
}

// The builder pool writes CUDA artifacts for cuda targets and refuses, with the
// reason, a program no GPU can run; the runner measures them through kiln-cuda-measure
// (here, without a GPU, it says there is none).
TEST(CudaMeasure, BuilderPoolAndRunnerHandleCudaTargets) {
  ir::PrimFunc f = lower(Workload::single("matmul", {{{64, 32}, DType::kFloat32}, {{32, 64}, DType::kFloat32}}), "mm");
  ir::Schedule sch(f);
  test_support::schedule_gemm_shared_tiles(sch, "matmul", test_support::GemmTiles{32, 32, 8, 4, 4, 2});
  Target target = Target::parse("cuda -arch=sm_90");
  std::string dir = ::testing::TempDir() + "/cuda_pool";
  LocalBuilderPool pool(1, dir, 60);
  std::vector<BuildResult> built = pool.build({{sch.func(), target, "candidate"}, {f, target, "unbound"}});
  ASSERT_TRUE(built[0].ok()) << built[0].message;
  EXPECT_NE(built[0].artifact_path.find(".cuda.json"), std::string::npos);
  CudaArtifact artifact = read_cuda_artifact(built[0].artifact_path);
  EXPECT_EQ(artifact.launches.size(), 1u);
  // Where the toolkit is installed the artifact also carries the cubin for its arch.
  if (!codegen::find_ptxas().empty()) {
    EXPECT_GT(artifact.cubin.size(), 100u);
    EXPECT_EQ(artifact.cubin.substr(0, 4),
              "\x7f"
              "ELF");
    EXPECT_FALSE(artifact.cubin_toolkit.empty());
  }
  EXPECT_EQ(built[1].error, ErrorKind::kBuildError);
  EXPECT_NE(built[1].message.find("would run on one GPU thread"), std::string::npos) << built[1].message;

  CudaRunner runner(CudaRunnerOptions{});
  RunInput in;
  in.artifact_path = built[0].artifact_path;
  std::string why;
  if (CudaDriver::open(0, &why)) {
    EXPECT_NE(runner.probe().find("\"arch\""), std::string::npos);
    EXPECT_TRUE(runner.run_one(in).ok());
  } else {
    EXPECT_THROW(runner.probe(), std::runtime_error);
    RunResult r = runner.run_one(in);
    EXPECT_EQ(r.error, ErrorKind::kLoadError);
    EXPECT_NE(r.message.find("cannot measure on a GPU here"), std::string::npos) << r.message;
  }
  RunInput missing;
  missing.artifact_path = dir + "/nothing.cuda.json";
  EXPECT_EQ(runner.run_one(missing).error, ErrorKind::kLoadError);
}

// Runs on the GPU and compares with the interpreter; skipped, with the reason, without one.
TEST(GpuDevice, HandProgramsAgreeWithTheInterpreter) {
  std::string why;
  std::unique_ptr<CudaDriver> driver = CudaDriver::open(0, &why);
  if (!driver) GTEST_SKIP() << "no GPU here: " << why;
  ir::PrimFunc f;
  codegen::CudaModule m = gemm_module(128, 96, 64, &f);
  CudaArtifact a = parse_cuda_artifact(m.artifact_text());
  std::mt19937_64 rng(3);
  std::vector<ir::HostTensor> inputs;
  std::vector<std::vector<uint8_t>> bytes;
  for (size_t i = 0; i < 2; ++i) {
    inputs.push_back(ir::HostTensor::like(f.params[i]));
    inputs.back().fill_random(rng, -1.0, 1.0);
    std::vector<uint8_t> b(static_cast<size_t>(f.params[i]->num_elements()) * 4);
    for (int64_t e = 0; e < f.params[i]->num_elements(); ++e) {
      float v = static_cast<float>(inputs.back().get(e));
      std::memcpy(&b[static_cast<size_t>(e) * 4], &v, 4);
    }
    bytes.push_back(std::move(b));
  }
  CudaTimingOptions timing;
  timing.repeats = 3;
  CudaMeasurement got = driver->measure(a, bytes, timing);
  ASSERT_EQ(got.outputs.size(), 1u);
  ir::HostTensor want = ir::interpret(f, inputs)[0];
  ir::HostTensor out = ir::HostTensor::like(f.params[2]);
  for (int64_t e = 0; e < out.size(); ++e) {
    float v;
    std::memcpy(&v, &got.outputs[0][static_cast<size_t>(e) * 4], 4);
    out.set(e, v);
  }
  EXPECT_LT(ir::relative_l2_error(out, want), 1e-5) << "on " << driver->device_name();
  EXPECT_GT(got.median_seconds(), 0);
}

}  // namespace
}  // namespace kiln::measure
