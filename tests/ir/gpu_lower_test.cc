// Programs scheduled for a GPU: their lowering to kernels (launch shape, barriers,
// shared and local buffers), the verification that refuses what a GPU cannot run, and
// the interpreter running the kernels thread by thread against the unscheduled program.
#include <gtest/gtest.h>

#include <random>

#include "ir/functor.h"
#include "ir/gpu_lower.h"
#include "ir/interpreter.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "te/te.h"
#include "tests/common/gpu_schedules.h"

namespace kiln::ir {
namespace {

using ops::Workload;
using test_support::GemmTiles;

PrimFunc matmul(int64_t m, int64_t n, int64_t k) {
  Workload w = Workload::single("matmul", {{{m, k}, DType::kFloat32}, {{k, n}, DType::kFloat32}});
  return te::lower(w.build_dag(), "matmul");
}

std::vector<HostTensor> random_inputs(const PrimFunc &f, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < count; ++i) {
    inputs.push_back(HostTensor::like(f.params[i]));
    inputs.back().fill_random(rng, -1.0, 1.0);
  }
  return inputs;
}

// Runs `program` as the GPU would and returns its outputs.
std::vector<HostTensor> run_gpu(const GpuProgram &program, const PrimFunc &f, std::vector<HostTensor> inputs) {
  std::vector<HostTensor> all = std::move(inputs);
  size_t n_inputs = all.size();
  for (size_t i = n_inputs; i < f.params.size(); ++i) all.push_back(HostTensor::like(f.params[i]));
  std::vector<HostTensor *> args;
  for (HostTensor &t : all) args.push_back(&t);
  interpret_gpu(program, args);
  return std::vector<HostTensor>(all.begin() + static_cast<long>(n_inputs), all.end());
}

int count_barriers(const Stmt &s) {
  int n = 0;
  for_each_stmt(s, [&](const Stmt &x) { n += x.kind() == StmtKind::kBarrier; });
  return n;
}

TEST(GpuLower, GemmWithSharedTilesRunsThreadByThreadAsTheSequentialProgram) {
  PrimFunc f = matmul(128, 64, 32);
  Schedule sch(f);
  test_support::schedule_gemm_shared_tiles(sch, "matmul", GemmTiles{32, 32, 8, 4, 4, 2});
  GpuProgram p = lower_for_gpu(sch.func(), GpuLimits{});
  ASSERT_EQ(p.kernels.size(), 1u) << to_string(p);
  const GpuKernel &k = p.kernels[0];
  EXPECT_EQ(k.grid, (std::array<int64_t, 3>{2, 4, 1}));
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{8, 8, 1}));
  // Two 32x8 tiles of A and B in shared memory, a 4x4 accumulator per thread.
  ASSERT_EQ(k.shared.size(), 2u) << to_string(p);
  EXPECT_EQ(k.shared_bytes, 2 * 32 * 8 * 4) << to_string(p);
  EXPECT_EQ(k.local_bytes, 4 * 4 * 4) << to_string(p);
  // Before the threads read the tiles, and before the next slice overwrites them.
  EXPECT_EQ(count_barriers(k.body), 2) << to_string(p);

  std::vector<HostTensor> inputs = random_inputs(f, 2, 7);
  HostTensor expected = interpret(f, inputs)[0];
  EXPECT_LT(relative_l2_error(run_gpu(p, f, inputs)[0], expected), 1e-6);
  // The scheduled program read sequentially agrees too.
  EXPECT_LT(relative_l2_error(interpret(sch.func(), inputs)[0], expected), 1e-6);
}

// Without its barriers the same kernel reads tiles other threads have not written yet:
// the interpreter runs threads as a GPU may, so it sees the race.
TEST(GpuLower, TheInterpreterSeesARaceWhenBarriersAreMissing) {
  PrimFunc f = matmul(64, 64, 16);
  Schedule sch(f);
  test_support::schedule_gemm_shared_tiles(sch, "matmul", GemmTiles{32, 32, 8, 4, 4, 1});
  GpuProgram p = lower_for_gpu(sch.func(), GpuLimits{});
  struct DropBarriers : IRMutator {
    Stmt visit(const BarrierNode *, const Stmt &) override { return make_seq({}); }
  };
  GpuProgram racy = p;
  racy.kernels[0].body = DropBarriers().mutate(p.kernels[0].body);
  ASSERT_EQ(count_barriers(racy.kernels[0].body), 0);
  std::vector<HostTensor> inputs = random_inputs(f, 2, 3);
  HostTensor expected = interpret(f, inputs)[0];
  EXPECT_LT(relative_l2_error(run_gpu(p, f, inputs)[0], expected), 1e-6);
  // Reads of unwritten shared memory see NaN poison or the previous slice.
  double racy_error = relative_l2_error(run_gpu(racy, f, inputs)[0], expected);
  EXPECT_FALSE(racy_error < 1e-3) << racy_error;
}

TEST(GpuLower, ElementwiseProgramsBecomeOneKernelPerNest) {
  Workload w = Workload::single("relu", {{{3, 5, 7}, DType::kFloat32}});
  PrimFunc f = te::lower(w.build_dag(), "relu");
  Schedule sch(f);
  test_support::schedule_elementwise(sch, "relu", 32);
  GpuProgram p = lower_for_gpu(sch.func(), GpuLimits{});
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].grid[0], 4);  // ceil(105 / 32)
  EXPECT_EQ(p.kernels[0].block[0], 32);
  EXPECT_EQ(count_barriers(p.kernels[0].body), 0);
  std::vector<HostTensor> inputs = random_inputs(f, 1, 5);
  EXPECT_EQ(relative_l2_error(run_gpu(p, f, inputs)[0], interpret(f, inputs)[0]), 0.0);
}

TEST(GpuLower, ConvolutionWithSharedWindowsRunsAsTheSequentialProgram) {
  Workload w = Workload::single("conv2d", {{{1, 16, 16, 16}, DType::kFloat32}, {{16, 16, 3, 3}, DType::kFloat32}},
                                {{"pads", {1, 1, 1, 1}}});
  PrimFunc f = te::lower(w.build_dag(), "conv");
  Schedule sch(f);
  test_support::schedule_conv2d_shared_tiles(sch, test_support::ConvTiles{4, 2, 2, 2, 8, 8});
  GpuProgram p = lower_for_gpu(sch.func(), GpuLimits{});
  ASSERT_EQ(p.kernels.size(), 1u) << to_string(p);
  const GpuKernel &k = p.kernels[0];
  EXPECT_EQ(k.block, (std::array<int64_t, 3>{8, 2, 4}));
  EXPECT_EQ(k.grid[0], 2 * 4 * 2);
  // The window: 8 channels x (4 + 2) rows x (8 + 2) columns; the weights 8 x 8 x 3 x 3.
  EXPECT_EQ(k.shared_bytes, (8 * 6 * 10 + 8 * 8 * 3 * 3) * 4) << to_string(p);
  std::vector<HostTensor> inputs = random_inputs(f, 2, 17);
  EXPECT_LT(relative_l2_error(run_gpu(p, f, inputs)[0], interpret(f, inputs)[0]), 1e-6);
}

TEST(GpuLower, SoftmaxRowsReduceAcrossThreads) {
  for (int64_t threads : {int64_t{32}, int64_t{128}}) {
    SCOPED_TRACE(threads);
    Workload w = Workload::single("softmax", {{{5, 300}, DType::kFloat32}});
    PrimFunc f = te::lower(w.build_dag(), "softmax");
    Schedule sch(f);
    test_support::schedule_softmax_rows(sch, threads);
    GpuProgram p = lower_for_gpu(sch.func(), GpuLimits{});
    ASSERT_EQ(p.kernels.size(), 1u) << to_string(p);
    const GpuKernel &k = p.kernels[0];
    EXPECT_EQ(k.grid[0], 5);
    EXPECT_EQ(k.block[0], threads);
    int reductions = 0;
    for_each_stmt(k.body, [&](const Stmt &s) { reductions += s.kind() == StmtKind::kThreadAllReduce; });
    EXPECT_EQ(reductions, 2) << to_string(p);
    std::vector<HostTensor> inputs = random_inputs(f, 1, 11);
    EXPECT_LT(relative_l2_error(run_gpu(p, f, inputs)[0], interpret(f, inputs)[0]), 1e-6) << to_string(p);
  }
}

std::string lowering_error(const PrimFunc &f, const GpuLimits &limits = GpuLimits{}) {
  try {
    lower_for_gpu(f, limits);
  } catch (const GpuLoweringError &e) {
    return e.what();
  }
  return "";
}

TEST(GpuLower, RefusesWhatAGpuCannotRunAndSaysWhy) {
  PrimFunc f = matmul(128, 128, 32);
  auto contains = [](const std::string &message, const std::string &part) {
    return message.find(part) != std::string::npos;
  };
  {
    Schedule sch(f);  // nothing bound
    EXPECT_TRUE(contains(lowering_error(sch.func()), "would run on one GPU thread"));
  }
  {
    Schedule sch(f);  // 64 x 64 threads
    test_support::schedule_gemm_shared_tiles(sch, "matmul", GemmTiles{128, 128, 8, 2, 2, 1});
    EXPECT_TRUE(contains(lowering_error(sch.func()), "4096 threads per block")) << lowering_error(sch.func());
  }
  {
    Schedule sch(f);
    test_support::schedule_gemm_shared_tiles(sch, "matmul", GemmTiles{32, 32, 8, 4, 4, 1});
    GpuLimits small;
    small.max_shared_bytes_per_block = 1024;
    EXPECT_TRUE(contains(lowering_error(sch.func(), small), "2048 bytes of shared memory per block"))
        << lowering_error(sch.func(), small);
    GpuLimits few_registers;
    few_registers.max_local_bytes_per_thread = 32;
    EXPECT_TRUE(contains(lowering_error(sch.func(), few_registers), "64 bytes of local buffers per thread"));
  }
  {
    Schedule sch(f);  // blockIdx inside a thread loop
    std::vector<LoopRV> l = sch.get_loops(sch.get_block("matmul"));
    std::vector<LoopRV> i = sch.split(l[0], {int64_t{8}, int64_t{16}});
    sch.bind(i[0], "threadIdx.x");
    sch.bind(i[1], "blockIdx.x");
    EXPECT_TRUE(contains(lowering_error(sch.func()), "must be the outermost")) << lowering_error(sch.func());
  }
  {
    Schedule sch(f);  // a CPU schedule
    std::vector<LoopRV> l = sch.get_loops(sch.get_block("matmul"));
    sch.parallel(l[0]);
    sch.bind(l[1], "threadIdx.x");
    EXPECT_TRUE(contains(lowering_error(sch.func()), "is parallel, a CPU schedule"));
  }
  {
    Schedule sch(f);  // 16 virtual threads
    std::vector<LoopRV> l = sch.get_loops(sch.get_block("matmul"));
    std::vector<LoopRV> j = sch.split(l[1], {int64_t{-1}, int64_t{16}});
    sch.bind(l[0], "blockIdx.x");
    sch.bind(j[0], "threadIdx.x");
    sch.bind(j[1], "vthread.x");
    EXPECT_TRUE(contains(lowering_error(sch.func()), "16 virtual threads")) << lowering_error(sch.func());
  }
  {
    Schedule sch(f);  // 8 floats per access
    std::vector<LoopRV> l = sch.get_loops(sch.get_block("matmul"));
    std::vector<LoopRV> j = sch.split(l[1], {int64_t{-1}, int64_t{8}});
    sch.bind(l[0], "blockIdx.x");
    sch.bind(j[0], "threadIdx.x");
    sch.reorder({l[0], j[0], l[2], j[1]});
    sch.vectorize(j[1]);
    EXPECT_TRUE(contains(lowering_error(sch.func()), "vectorized over 32 bytes")) << lowering_error(sch.func());
  }
}

}  // namespace
}  // namespace kiln::ir
