// Feature extraction: row shape, the direction of specific features under known
// schedule changes, robustness on every example workload under random schedules,
// and speed on a typical tiled GEMM.
#include "costmodel/features.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "ir/lower_passes.h"
#include "ir/schedule/schedule.h"
#include "ops/examples.h"
#include "te/te.h"
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

}  // namespace
}  // namespace kiln::costmodel
