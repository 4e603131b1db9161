// Feature extraction: row shape, the direction of specific features under known
// schedule changes, robustness on every example workload under random schedules,
// and speed on a typical tiled GEMM.
#include "costmodel/features.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "costmodel/xgb_model.h"
#include "ir/lower_passes.h"
#include "ir/schedule/schedule.h"
#include "ops/examples.h"
#include "te/te.h"
#include "tests/common/gpu_schedules.h"
#include "tests/common/random_schedule.h"
#include "tests/costmodel/gemm_schedules.h"

namespace kiln::costmodel {
namespace {

using testing::tiled_gemm;

float at(const ProgramFeatures &f, size_t row, const char *name) { return f.row(row)[feature_index(name)]; }

// The row of the reduction update (the store with the multiply-adds), not its init.
size_t update_row(const ProgramFeatures &f) {
  size_t best = 0;
  for (size_t r = 0; r < f.num_rows(); ++r) {
    if (at(f, r, "float_mad") > at(f, best, "float_mad")) best = r;
  }
  return best;
}

TEST(Features, RowLengthMatchesNames) {
  ProgramFeatures f = extract_features(tiled_gemm(32, 32, 32, 8, true));
  ASSERT_TRUE(f.ok()) << f.error;
  ASSERT_EQ(f.num_rows(), 2u) << "the init and the update of the matmul";
  EXPECT_EQ(f.values.size(), f.num_rows() * feature_names().size());
  EXPECT_EQ(f.row(0).size(), feature_names().size());
  for (float v : f.values) EXPECT_TRUE(std::isfinite(v));
}

TEST(Features, NamesAreUniqueAndIndexed) {
  const auto &names = feature_names();
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(feature_index(names[i]), i);
  EXPECT_THROW(feature_index("no_such_feature"), std::invalid_argument);
}

TEST(Features, VectorizationShowsInTheRightDirection) {
  ProgramFeatures plain = extract_features(tiled_gemm(64, 64, 64, 16, false));
  ProgramFeatures vec = extract_features(tiled_gemm(64, 64, 64, 16, true));
  ASSERT_TRUE(plain.ok() && vec.ok());
  size_t p = update_row(plain), v = update_row(vec);
  EXPECT_EQ(at(plain, p, "vec_num"), 0);
  EXPECT_EQ(at(plain, p, "vec_pos_none"), 1);
  EXPECT_FLOAT_EQ(at(vec, v, "vec_num"), 1);  // log2(1 + 1)
  EXPECT_FLOAT_EQ(at(vec, v, "vec_len"), std::log2(17.0f));
  EXPECT_FLOAT_EQ(at(vec, v, "vec_prod"), std::log2(17.0f));
  EXPECT_EQ(at(vec, v, "vec_pos_inner_spatial"), 1);
  EXPECT_EQ(at(vec, v, "vec_pos_none"), 0);
  // Nothing else about the computation changes.
  EXPECT_EQ(at(plain, p, "float_mad"), at(vec, v, "float_mad"));
  EXPECT_EQ(at(plain, p, "outer_prod"), at(vec, v, "outer_prod"));
  EXPECT_GT(at(vec, v, "float_mad"), 0);
  EXPECT_EQ(at(vec, v, "float_addsub"), 0) << "a*b+c counts as one multiply-add";
}

TEST(Features, ParallelLoopIsCountedAsOuterSpatial) {
  ProgramFeatures f = extract_features(tiled_gemm(64, 64, 64, 16, true, true));
  ASSERT_TRUE(f.ok());
  size_t r = update_row(f);
  EXPECT_FLOAT_EQ(at(f, r, "parallel_num"), 1);
  EXPECT_FLOAT_EQ(at(f, r, "parallel_prod"), std::log2(65.0f));
  EXPECT_EQ(at(f, r, "parallel_pos_outer_spatial"), 1);
}

TEST(Features, AccessFeaturesOfGemm) {
  // i, jo, k, ji with ji innermost: the output and B move with unit stride along ji,
  // A does not move with ji at all (loop-multiple-read with reuse count 16).
  ProgramFeatures f = extract_features(tiled_gemm(64, 64, 64, 16, false));
  size_t r = update_row(f);
  int read_write = 0, unit_stride = 0, loop_reuse_16 = 0;
  for (int b = 0; b < 3; ++b) {
    std::string p = "B" + std::to_string(b) + ".";
    read_write += at(f, r, (p + "acc_type_read_write").c_str()) == 1;
    unit_stride += at(f, r, (p + "stride").c_str()) == 1;  // log2(1 + 1)
    if (at(f, r, (p + "reuse_type_loop_multiple_read").c_str()) == 1 &&
        at(f, r, (p + "reuse_ct").c_str()) == std::log2(17.0f)) {
      ++loop_reuse_16;
    }
    // All 64x64 elements of every operand are touched.
    EXPECT_FLOAT_EQ(at(f, r, (p + "unique_bytes").c_str()), std::log2(1 + 64.0f * 64 * 4)) << p;
  }
  EXPECT_EQ(read_write, 1);
  EXPECT_EQ(unit_stride, 2);
  EXPECT_EQ(loop_reuse_16, 1);
  EXPECT_EQ(at(f, r, "B3.bytes"), 0) << "only three buffers; the rest is zero padding";
  EXPECT_FLOAT_EQ(at(f, r, "num_loops"), std::log2(5.0f));  // four loops
}

TEST(Features, ArithmeticIntensityGrowsWithReuse) {
  ProgramFeatures f = extract_features(tiled_gemm(64, 64, 64, 16, false));
  size_t r = update_row(f);
  float first = at(f, r, "arith_intensity_curve_0");
  float last = at(f, r, "arith_intensity_curve_9");
  EXPECT_GT(first, 0);
  EXPECT_GT(last, first) << "a whole GEMM does more FLOPs per byte than its innermost loop";
}

TEST(Features, EveryExampleUnderRandomSchedules) {
  for (const ops::NamedWorkload &w : ops::small_example_workloads()) {
    ir::PrimFunc base = te::lower(w.workload.build_dag(), w.name);
    for (uint64_t seed = 0; seed < 8; ++seed) {
      std::mt19937_64 rng(seed);
      ir::Schedule sch(base, seed);
      for (int s = 0; s < 8; ++s) {
        try {
          test_support::random_step(sch, rng);
        } catch (const ir::ScheduleError &) {
        }
      }
      ProgramFeatures f = extract_features(sch.func());
      ASSERT_TRUE(f.ok()) << w.name << " seed " << seed << ": " << f.error;
      ASSERT_GE(f.num_rows(), 1u) << w.name;
      ASSERT_EQ(f.values.size(), f.num_rows() * feature_names().size());
      for (float v : f.values) ASSERT_TRUE(std::isfinite(v)) << w.name << " seed " << seed;
    }
  }
}

TEST(Features, BatchMatchesSequentialExtraction) {
  std::vector<ir::PrimFunc> programs;
  for (int64_t tile : {2, 4, 8, 16, 32}) {
    programs.push_back(tiled_gemm(64, 64, 64, tile, tile % 8 == 0));
    programs.push_back(tiled_gemm(32, 64, 16, tile, tile % 4 == 0, true));
  }
  std::vector<ProgramFeatures> batch = extract_features_batch(programs, 4);
  ASSERT_EQ(batch.size(), programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    EXPECT_EQ(batch[i].values, extract_features(programs[i]).values) << i;
  }
}

TEST(Features, FastOnATiledGemm) {
  // Not a timing assertion on shared machines: a generous bound that only catches an
  // accidental blow-up (the target is well under 10 ms).
  ir::PrimFunc f = tiled_gemm(512, 512, 512, 16, true, true);
  ir::PrimFunc lowered = ir::lower_for_codegen(f);
  auto start = std::chrono::steady_clock::now();
  int runs = 20;
  for (int i = 0; i < runs; ++i) extract_features_lowered(lowered);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / runs;
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) extract_features(f);
  double with_lowering =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / runs;
  std::printf("feature extraction of a tiled GEMM: %.3f ms, %.3f ms with lowering\n", ms, with_lowering);
  EXPECT_LT(ms, 50);
  EXPECT_LT(with_lowering, 50);
}

// ---- GPU programs --------------------------------------------------------------------

ir::PrimFunc gpu_gemm(int64_t n, const test_support::GemmTiles &tiles) {
  ops::Workload w = ops::Workload::single("matmul", {{{n, n}, ir::DType::kFloat32}, {{n, n}, ir::DType::kFloat32}});
  ir::Schedule sch(te::lower(w.build_dag(), "matmul"));
  test_support::schedule_gemm_shared_tiles(sch, "matmul", tiles);
  return sch.func();
}

// sm_90's limits (target/cuda_arch.cc): 2048 threads, 32 blocks, 228 KiB of shared
// memory and 65536 registers per SM; 132 SMs.
const GpuLimits kSm90{32, 2048, 32, 228 * 1024, 65536, 132};

float slog2(double x) { return static_cast<float>(std::log2(1 + x)); }

// The launch, the on-chip memory and the occupancy of a shared-tile GEMM, worked out by
// hand: 64x64 tiles of C with 4x4 per thread are 16 x 16 = 256 threads per block and
// (256 / 64)^2 = 16 blocks; A's 64x8 and B's 8x64 slices take 4 KiB of shared memory;
// each thread's 4x4 accumulator 64 bytes of local memory, 24 + 16 = 40 registers by the
// estimate. Registers then bound the blocks on an SM: 65536 / (40 * 256) = 6 blocks of
// 8 warps, 48 of 64 warps: occupancy 0.75, and 16 blocks fill 16 / (6 * 132) of a wave.
TEST(GpuFeatures, SharedTileGemmLaunchAndOccupancy) {
  ProgramFeatures f = extract_features(gpu_gemm(256, {64, 64, 8, 4, 4, 1}), &kSm90);
  ASSERT_TRUE(f.ok()) << f.error;
  ASSERT_EQ(f.num_columns, feature_names(true).size());
  ASSERT_GT(f.num_rows(), 0u);
  for (size_t r = 0; r < f.num_rows(); ++r) {
    SCOPED_TRACE(f.store_names[r]);
    EXPECT_FLOAT_EQ(at(f, r, "gpu.threads_per_block"), slog2(256));
    EXPECT_FLOAT_EQ(at(f, r, "gpu.blocks"), slog2(16));
    EXPECT_FLOAT_EQ(at(f, r, "gpu.shared_bytes_per_block"), slog2(2 * 64 * 8 * 4));
    EXPECT_FLOAT_EQ(at(f, r, "gpu.local_bytes_per_thread"), slog2(4 * 4 * 4));
    EXPECT_FLOAT_EQ(at(f, r, "gpu.registers_estimate"), slog2(40));
    EXPECT_FLOAT_EQ(at(f, r, "gpu.occupancy"), 0.75f);
    EXPECT_FLOAT_EQ(at(f, r, "gpu.waves"), static_cast<float>(16.0 / (6 * 132)));
    // Every multiply-add reads A and B from shared memory: 2 * 256^3 loads of 4 bytes
    // at least, where global memory is read once per slice copy.
    EXPECT_GT(at(f, r, "gpu.shared_bytes"), slog2(2.0 * 256 * 256 * 256 * 4));
    EXPECT_LT(at(f, r, "gpu.global_bytes"), at(f, r, "gpu.shared_bytes"));
    EXPECT_EQ(at(f, r, "is_gpu"), 1.0f);
  }
  // The CPU columns are the CPU layout's: the same program without the GPU limits.
  ProgramFeatures cpu = extract_features(gpu_gemm(256, {64, 64, 8, 4, 4, 1}));
  ASSERT_EQ(cpu.num_columns, feature_names().size());
  ASSERT_EQ(cpu.num_rows(), f.num_rows());
  for (size_t r = 0; r < f.num_rows(); ++r)
    for (size_t c = 0; c < cpu.num_columns; ++c) EXPECT_EQ(cpu.row(r)[c], f.row(r)[c]) << feature_names()[c];
}

// Bigger thread tiles hold more accumulators, so fewer blocks fit an SM; bigger block
// tiles need more shared memory and fewer blocks cover the matrix.
TEST(GpuFeatures, OccupancyFallsWithRegistersAndBlocksWithTiles) {
  ProgramFeatures small = extract_features(gpu_gemm(512, {64, 64, 8, 4, 4, 1}), &kSm90);
  ProgramFeatures more_registers = extract_features(gpu_gemm(512, {64, 64, 8, 8, 8, 1}), &kSm90);
  ProgramFeatures bigger_blocks = extract_features(gpu_gemm(512, {128, 128, 8, 8, 8, 1}), &kSm90);
  ASSERT_TRUE(small.ok() && more_registers.ok() && bigger_blocks.ok());
  EXPECT_LT(at(more_registers, 0, "gpu.registers_estimate"), slog2(255) + 1e-6f);
  EXPECT_GT(at(more_registers, 0, "gpu.registers_estimate"), at(small, 0, "gpu.registers_estimate"));
  EXPECT_LT(at(more_registers, 0, "gpu.threads_per_block"), at(small, 0, "gpu.threads_per_block"));
  EXPECT_GT(at(bigger_blocks, 0, "gpu.shared_bytes_per_block"), at(small, 0, "gpu.shared_bytes_per_block"));
  EXPECT_LT(at(bigger_blocks, 0, "gpu.blocks"), at(small, 0, "gpu.blocks"));
  for (const ProgramFeatures *f : {&small, &more_registers, &bigger_blocks}) {
    EXPECT_GT(at(*f, 0, "gpu.occupancy"), 0.0f);
    EXPECT_LE(at(*f, 0, "gpu.occupancy"), 1.0f);
  }
}

// One cost model per target kind: a model for CPU rows refuses GPU rows with a reason,
// and one built for GPU rows trains and ranks them.
TEST(GpuFeatures, ACostModelTakesTheRowsOfItsOwnLayout) {
  std::vector<ProgramFeatures> programs;
  std::vector<double> throughputs;
  const int64_t sizes[][2] = {{2, 2}, {4, 4}, {8, 4}, {4, 8}, {8, 8}, {2, 4}, {4, 2}, {2, 8}};
  for (int64_t block : {32, 64}) {
    for (const auto &t : sizes) {
      if (block % t[0] != 0 || block % t[1] != 0) continue;
      programs.push_back(extract_features(gpu_gemm(256, {block, block, 8, t[0], t[1], 1}), &kSm90));
      ASSERT_TRUE(programs.back().ok()) << programs.back().error;
      throughputs.push_back(static_cast<double>(t[0] * t[1]) / static_cast<double>(block));
    }
  }
  Measurements data{programs, throughputs, std::vector<std::string>(programs.size(), "gemm")};
  XGBoostOptions cpu_options;
  cpu_options.min_samples = 4;
  XGBoostCostModel cpu_model(cpu_options);
  try {
    cpu_model.update(data);
    ADD_FAILURE() << "a CPU-layout model took GPU rows";
  } catch (const std::logic_error &e) {
    EXPECT_NE(std::string(e.what()).find("a cost model each"), std::string::npos) << e.what();
  }
  XGBoostOptions gpu_options = cpu_options;
  gpu_options.num_features = feature_names(true).size();
  XGBoostCostModel gpu_model(gpu_options);
  gpu_model.update(data);
  ASSERT_TRUE(gpu_model.ready());
  std::vector<float> scores = gpu_model.predict(programs);
  ASSERT_EQ(scores.size(), programs.size());
  for (float s : scores) EXPECT_TRUE(std::isfinite(s));
}

}  // namespace
}  // namespace kiln::costmodel
