// Constant weights packed ahead of time (ir/layout_rewrite.h) through a real artifact:
// kiln_artifact_info describes the packed parameter, kiln_prepack packs the weight, and
// kiln_entry reads only the packed copy.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"
#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "te/te.h"
#include "tests/common/packed_dense.h"

namespace kiln::codegen {
namespace {

using ir::HostTensor;
using test_support::dense_workload;
using test_support::packed_dense_schedule;

const Target kAvx2 = Target::parse("llvm -mcpu=znver3 -mtriple=x86_64-linux-gnu -num-cores=2");
const Target kAvx512 = Target::parse("llvm -mcpu=sapphirerapids -mtriple=x86_64-linux-gnu -num-cores=2");

// 37 columns in panels of 16 (the last one partial), 24-long rows; the panels split over
// the threads when `parallel_panels`.
ir::PrimFunc scheduled_dense(bool constant_weights, ir::PrimFunc *unscheduled, bool parallel_panels = false) {
  *unscheduled = te::lower(dense_workload(7, 37, 24, constant_weights).build_dag(), "dense");
  ir::Schedule sch = packed_dense_schedule(*unscheduled, 16, false);
  if (parallel_panels) sch.parallel(sch.get_loops(sch.get_block("dense"))[0]);
  return sch.func();
}

TEST(CodegenX86Prepack, ArtifactsOfConstantWeightsExportThePrepackOnEveryIsa) {
  Compiler compiler;
  ir::PrimFunc unscheduled;
  for (const Target &target : {kAvx2, kAvx512}) {
    std::string packed = compiler.emit_llvm_ir(scheduled_dense(true, &unscheduled), target);
    EXPECT_NE(packed.find("@" KILN_PREPACK_SYMBOL "("), std::string::npos) << target.str();
    EXPECT_NE(packed.find(R"(\22packed_from\22:{\22dtype\22:\22float32\22,\22name\22:\22in1\22,\22shape\22:[37,24]})"),
              std::string::npos)
        << target.str();
    std::string plain = compiler.emit_llvm_ir(scheduled_dense(false, &unscheduled), target);
    EXPECT_EQ(plain.find(KILN_PREPACK_SYMBOL), std::string::npos) << target.str();
    EXPECT_EQ(plain.find("packed_from"), std::string::npos) << target.str();
  }
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A thread's tasks are consecutive panels: while it computes one, its reduction loop
// prefetches the next panel of packed weights into L2, a line per iteration (inside a
// model the weights come from memory). Without a parallel loop there is no next task.
TEST(CodegenX86Prepack, ParallelPanelsPrefetchTheNextPanelOfWeights) {
  Compiler compiler;
  ir::PrimFunc unscheduled;
  for (const Target &target : {kAvx2, kAvx512}) {
    std::string parallel = compiler.emit_llvm_ir(scheduled_dense(true, &unscheduled, true), target);
    // Read, into L2 (locality 2), data (LLVM unrolls the short reduction loop, and the
    // prefetch with it).
    EXPECT_GE(count(parallel, "call void @llvm.prefetch.p0(ptr "), 1u) << target.str();
    EXPECT_NE(parallel.find(", i32 0, i32 2, i32 1)"), std::string::npos) << target.str();
    std::string serial = compiler.emit_llvm_ir(scheduled_dense(true, &unscheduled, false), target);
    EXPECT_EQ(serial.find("@llvm.prefetch"), std::string::npos) << target.str();
  }
}

// Pack once, poison the weight, run twice: both runs match the interpreter on the
// original weight, so the kernel reads the packed copy alone and packing is not
// consumed by a call.
// Serial and with the panels parallel (each task prefetching the next one's, the last
// one's reaching past the buffer).
class PackedWeightRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(PackedWeightRoundTrip, ThroughThePrepackOnTheHost) {
  ir::PrimFunc unscheduled;
  ir::PrimFunc scheduled = scheduled_dense(true, &unscheduled, GetParam());
  std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln_prepack_test_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string path = dir + "/dense.so";
  Compiler().build_artifact(scheduled, Target::parse("llvm -mcpu=native -num-cores=2"), path);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto entry = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_ENTRY_SYMBOL));
  auto prepack = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_PREPACK_SYMBOL));
  const char *info_text = static_cast<const char *>(dlsym(handle, KILN_INFO_SYMBOL));
  ASSERT_TRUE(entry && prepack && info_text);
  nlohmann::json info = nlohmann::json::parse(info_text);
  EXPECT_EQ(info["kiln_abi"], 2);
  const nlohmann::json &weight = info["params"][1];
  EXPECT_EQ(weight["packed_from"]["shape"], (std::vector<int64_t>{37, 24}));
  std::vector<int64_t> packed_shape = weight["shape"];
  EXPECT_EQ(packed_shape, (std::vector<int64_t>{3, 24, 16}));

  std::mt19937_64 rng(3);
  HostTensor x(ir::DType::kFloat32, {7, 24}), w(ir::DType::kFloat32, {37, 24});
  x.fill_random(rng);
  w.fill_random(rng);
  HostTensor want = ir::interpret(unscheduled, std::vector<HostTensor>{x, w}).at(0);
  HostTensor packed(ir::DType::kFloat32, packed_shape), out(ir::DType::kFloat32, {7, 37});
  packed.fill(std::nan(""));
  std::vector<void *> prepack_args{w.data(), packed.data()};
  ASSERT_EQ(prepack(prepack_args.data()), 0);
  w.fill(std::nan(""));
  std::vector<void *> args{x.data(), packed.data(), out.data()};
  for (int call = 0; call < 2; ++call) {
    out.fill(-777);
    ASSERT_EQ(entry(args.data()), 0);
    EXPECT_LT(ir::relative_l2_error(out, want), 1e-5) << "call " << call;
  }
  dlclose(handle);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(CodegenX86Prepack, PackedWeightRoundTrip, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> &p) { return p.param ? "Parallel" : "Serial"; });

}  // namespace
}  // namespace kiln::codegen
