// CUDA code generation without a GPU: hand schedules lowered to PTX for the archs Kiln
// targets, assembled by the toolkit's ptxas (registers, spills and shared memory read
// from its report), and refusals that name the reason.
#include <gtest/gtest.h>

#include <map>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "te/te.h"
#include "tests/common/gpu_schedules.h"

namespace kiln::codegen {
namespace {

using ir::DType;
using ir::PrimFunc;
using ir::Schedule;
using ops::Workload;

PrimFunc lower(const Workload &w, const std::string &name) { return te::lower(w.build_dag(), name); }

PrimFunc matmul(int64_t m, int64_t n, int64_t k) {
  return lower(Workload::single("matmul", {{{m, k}, DType::kFloat32}, {{k, n}, DType::kFloat32}}), "matmul");
}

const char *const kArchs[] = {"sm_80", "sm_87", "sm_90"};

TEST(CodegenCuda, SharedTileGemmBecomesPtxThatPtxasAcceptsForEachArch) {
  PrimFunc f = matmul(1024, 1024, 1024);
  Schedule sch(f);
  test_support::schedule_gemm_shared_tiles(sch, "matmul", test_support::GemmTiles{64, 64, 8, 4, 4, 2});
  Compiler compiler;
  std::string ptxas = find_ptxas();
  for (const char *arch : kArchs) {
    SCOPED_TRACE(arch);
    Target target = Target::parse(std::string("cuda -arch=") + arch);
    CudaModule m = compiler.build_cuda(sch.func(), target);
    EXPECT_EQ(m.arch, arch);
    EXPECT_NE(m.ptx.find(".version " + m.ptx_isa), std::string::npos);
    EXPECT_NE(m.ptx.find(".target " + std::string(arch)), std::string::npos);
    EXPECT_NE(m.ptx.find(".entry matmul_kernel0"), std::string::npos);
    EXPECT_NE(m.ptx.find("bar.sync"), std::string::npos);
    EXPECT_NE(m.ptx.find(".extern .shared"), std::string::npos);
    // A thread's 4 neighbouring operands of a tile row are read as one vector, its
    // results written back as vectors: their alignment is known from the indices.
    EXPECT_NE(m.ptx.find("ld.shared.v4.f32"), std::string::npos);
    EXPECT_NE(m.ptx.find("st.global.v4.f32"), std::string::npos);
    ASSERT_EQ(m.launches.size(), 1u);
    EXPECT_EQ(m.launches[0].grid, (std::array<int64_t, 3>{16, 16, 1}));
    EXPECT_EQ(m.launches[0].block, (std::array<int64_t, 3>{16, 16, 1}));
    EXPECT_EQ(m.launches[0].shared_bytes, 2 * 64 * 8 * 4);
    ASSERT_EQ(m.buffers.size(), 3u);
    EXPECT_EQ(m.buffers[2].role, "output");
    if (ptxas.empty()) {
      GTEST_SKIP() << "ptxas not found (no CUDA toolkit): PTX not assembled";
    }
    PtxasResult r = run_ptxas(m.ptx, arch, ptxas);
    ASSERT_EQ(r.kernels.size(), 1u) << r.log;
    EXPECT_EQ(r.kernels[0].name, "matmul_kernel0");
    EXPECT_EQ(r.kernels[0].arch, arch);
    // 16 accumulators and the operands they need: registers, not local memory.
    EXPECT_GE(r.kernels[0].registers, 16) << r.log;
    EXPECT_EQ(r.kernels[0].spill_store_bytes, 0) << r.log;
    EXPECT_FALSE(r.cubin.empty());
    check_registers(m, r.kernels, target);
  }
}

TEST(CodegenCuda, ConvolutionWithSharedWindowsAssemblesForEachArch) {
  PrimFunc f = lower(Workload::single("conv2d", {{{1, 64, 56, 56}, DType::kFloat32}, {{64, 64, 3, 3}, DType::kFloat32}},
                                      {{"pads", {1, 1, 1, 1}}}),
                     "conv");
  Schedule sch(f);
  test_support::schedule_conv2d_shared_tiles(sch, test_support::ConvTiles{});
  Compiler compiler;
  std::string ptxas = find_ptxas();
  for (const char *arch : kArchs) {
    SCOPED_TRACE(arch);
    CudaModule m = compiler.build_cuda(sch.func(), Target::parse(std::string("cuda -arch=") + arch));
    ASSERT_EQ(m.launches.size(), 1u);
    EXPECT_EQ(m.launches[0].grid[0], 4 * 14 * 4);
    EXPECT_EQ(m.launches[0].block, (std::array<int64_t, 3>{14, 2, 8}));
    if (ptxas.empty()) continue;
    PtxasResult r = run_ptxas(m.ptx, arch, ptxas);
    ASSERT_EQ(r.kernels.size(), 1u) << r.log;
    EXPECT_EQ(r.kernels[0].spill_store_bytes, 0) << r.log;
    EXPECT_EQ(r.kernels[0].stack_bytes, 0) << r.log;
  }
}

TEST(CodegenCuda, SoftmaxReducesAcrossThreadsWithWarpShuffles) {
  PrimFunc f = lower(Workload::single("softmax", {{{4096, 1000}, DType::kFloat32}}), "softmax");
  Compiler compiler;
  std::string ptxas = find_ptxas();
  std::map<int64_t, int64_t> shared_bytes;
  for (int64_t threads : {int64_t{32}, int64_t{256}}) {
    SCOPED_TRACE(threads);
    Schedule sch(f);
    test_support::schedule_softmax_rows(sch, threads);
    CudaModule m = compiler.build_cuda(sch.func(), Target::parse("cuda -arch=sm_90"));
    ASSERT_EQ(m.launches.size(), 1u);
    EXPECT_EQ(m.launches[0].grid[0], 4096);
    EXPECT_NE(m.ptx.find("shfl.sync.bfly.b32"), std::string::npos);
    shared_bytes[threads] = m.launches[0].shared_bytes;
    if (ptxas.empty()) continue;
    for (const char *arch : kArchs) {
      SCOPED_TRACE(arch);
      CudaModule for_arch = arch == std::string("sm_90")
                                ? m
                                : compiler.build_cuda(sch.func(), Target::parse(std::string("cuda -arch=") + arch));
      PtxasResult r = run_ptxas(for_arch.ptx, arch, ptxas);
      ASSERT_EQ(r.kernels.size(), 1u) << r.log;
      EXPECT_EQ(r.kernels[0].spill_store_bytes, 0) << r.log;
    }
  }
  // The row's maximum and sum (one float each, 16-byte aligned) and, across several
  // warps, the warps' results of each reduction.
  EXPECT_EQ(shared_bytes[32], 16 + 4);
  EXPECT_GT(shared_bytes[256], shared_bytes[32]);
}

TEST(CodegenCuda, ElementwiseMathLowersWithoutLibm) {
  Workload w = Workload::from_json(nlohmann::json::parse(R"({
    "inputs": [{"shape": [1000], "dtype": "float32"}, {"shape": [1000], "dtype": "float32"}],
    "ops": [{"op": "exp", "args": ["in0"]}, {"op": "log", "args": ["in1"]}, {"op": "pow", "args": ["op0", "op1"]},
            {"op": "tanh", "args": ["op2"]}, {"op": "erf", "args": ["op3"]}, {"op": "sqrt", "args": ["op4"]}],
    "outputs": ["op5"]})"));
  PrimFunc f = lower(w, "math");
  Schedule sch(f);
  for (const std::string &block : sch.block_names()) test_support::schedule_elementwise(sch, block, 128);
  Compiler compiler;
  CudaModule m = compiler.build_cuda(sch.func(), Target::parse("cuda -arch=sm_87"));
  EXPECT_EQ(m.launches.size(), 6u);
  EXPECT_EQ(m.ptx.find(".extern .func"), std::string::npos) << "a call the device cannot resolve";
  EXPECT_NE(m.ptx.find("lg2.approx"), std::string::npos);
  // Intermediates between kernels are device scratch.
  size_t scratch = 0;
  for (const CudaBuffer &b : m.buffers) scratch += b.role == "scratch";
  EXPECT_EQ(scratch, 5u);
  if (std::string ptxas = find_ptxas(); !ptxas.empty()) {
    PtxasResult r = run_ptxas(m.ptx, "sm_87", ptxas);
    EXPECT_EQ(r.kernels.size(), 6u) << r.log;
  }
}

TEST(CodegenCuda, RefusalsNameTheReason) {
  PrimFunc f = matmul(256, 256, 64);
  Compiler compiler;
  Schedule sch(f);  // 32 x 64 threads: 2048 per block
  test_support::schedule_gemm_shared_tiles(sch, "matmul", test_support::GemmTiles{64, 128, 8, 2, 2, 1});
  try {
    compiler.build_cuda(sch.func(), Target::parse("cuda -arch=sm_90"));
    FAIL() << "a 2048-thread block was accepted";
  } catch (const CodegenError &e) {
    EXPECT_NE(std::string(e.what()).find("2048 threads per block"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compiler.build_cuda(f, Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=generic")), CodegenError);

  CudaModule one;
  one.arch = "sm_87";
  one.launches.push_back({"k", {1, 1, 1}, {1024, 1, 1}, 0});
  Target orin = Target::parse("cuda -arch=sm_87");
  PtxasKernelReport many;
  many.name = "k";
  many.registers = 128;  // 128 x 1024 > 65536
  try {
    check_registers(one, {many}, orin);
    FAIL() << "128 registers x 1024 threads accepted";
  } catch (const CodegenError &e) {
    EXPECT_NE(std::string(e.what()).find("128 registers for each of 1024 threads"), std::string::npos) << e.what();
  }
}

TEST(CodegenCuda, PtxasReportsAreParsedPerKernel) {
  const char *text =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'a_kernel0' for 'sm_90'\n"
      "ptxas info    : Function properties for a_kernel0\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 376 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'a_kernel1' for 'sm_90'\n"
      "ptxas info    : Function properties for a_kernel1\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]\n"
      "a line a later ptxas adds\n";
  std::vector<PtxasKernelReport> r = parse_ptxas_report(text);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].name, "a_kernel0");
  EXPECT_EQ(r[0].registers, 40);
  EXPECT_EQ(r[0].shared_bytes, 2048);
  EXPECT_EQ(r[0].stack_bytes, 8);
  EXPECT_EQ(r[0].spill_store_bytes, 4);
  EXPECT_EQ(r[0].spill_load_bytes, 12);
  EXPECT_EQ(r[1].registers, 8);
  EXPECT_EQ(r[1].shared_bytes, 0);
  EXPECT_TRUE(parse_ptxas_report("garbage\n\n").empty());
}

}  // namespace
}  // namespace kiln::codegen
