// Layout rewrite: a constant weight's panels are packed once by a prepack program, and
// the kernel reading them computes what the unscheduled program does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "ir/functor.h"
#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "te/te.h"
#include "tests/common/packed_dense.h"

namespace kiln::ir {

using ops::Workload;
namespace {

using test_support::dense_workload;
using test_support::packed_dense_schedule;

struct PackedRun {
  HostTensor packed, out, want;
};

// Packs W with the prepack program, then runs the kernel on the packed weights; `want`
// is the unscheduled program's result.
PackedRun run_packed(const PrimFunc &unscheduled, const LayoutRewrite &r, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostTensor x = HostTensor::like(unscheduled.params[0]), w = HostTensor::like(unscheduled.params[1]);
  x.fill_random(rng, -1.0, 1.0);
  w.fill_random(rng, -1.0, 1.0);
  PackedRun run;
  run.want = interpret(unscheduled, std::vector<HostTensor>{x, w}).at(0);
  run.packed = HostTensor::like(r.packed.at(0).packed);
  // The prepack must fill every element itself, padding included.
  run.packed.fill(std::nan(""));
  interpret(*r.prepack, std::vector<HostTensor *>{&w, &run.packed});
  run.out = HostTensor::like(unscheduled.params[2]);
  interpret(r.kernel, std::vector<HostTensor *>{&x, &run.packed, &run.out});
  return run;
}

// 20 columns in panels of 8 (the last partial): the kernel takes a [3, 16, 8] buffer of
// every panel (k-major, columns last for the vector loop) in W's parameter slot, and
// no longer copies; the prepack zero-fills the 4 padding columns.
TEST(LayoutRewrite, ConstantWeightPanelsArePackedAheadOfTime) {
  Workload w = dense_workload(6, 20, 16, /*constant_weights=*/true);
  PrimFunc dense = te::lower(w.build_dag(), "dense");
  EXPECT_EQ(dense.constant_params, std::vector<size_t>{1});
  LayoutRewrite r = lower_with_prepack(packed_dense_schedule(dense, 8, false).func());
  ASSERT_EQ(r.packed.size(), 1u);
  ASSERT_TRUE(r.prepack.has_value());
  EXPECT_EQ(r.packed[0].param, 1u);
  EXPECT_EQ(r.packed[0].original->shape, (std::vector<int64_t>{20, 16}));
  EXPECT_EQ(r.packed[0].packed->shape, (std::vector<int64_t>{3, 16, 8}));
  EXPECT_EQ(r.kernel.params[1], r.packed[0].packed);
  std::set<std::string> computing;  // blocks with iterators (versions of a tile share names)
  for_each_stmt(r.kernel.body, [&](const Stmt &s) {
    if (const auto *b = s.as<BlockNode>(); b && !b->iter_vars.empty()) computing.insert(b->name);
  });
  EXPECT_EQ(computing, (std::set<std::string>{"dense_init", "dense"})) << "no copy left: " << to_string(r.kernel);
  PackedRun run = run_packed(dense, r, 7);
  EXPECT_LT(relative_l2_error(run.out, run.want), 1e-6);
  for (int64_t k = 0; k < 16; ++k)
    for (int64_t c = 4; c < 8; ++c) EXPECT_EQ(run.packed.get((2 * 16 + k) * 8 + c), 0.0) << k << "," << c;
}

// A copy placed under the row loop repeats for every row although it depends on the
// panel alone: it is made once per panel, not once per row.
TEST(LayoutRewrite, CopiesRepeatedAcrossLoopsTheyDoNotDependOnAreMadeOnce) {
  Workload w = dense_workload(6, 32, 16, true);
  PrimFunc dense = te::lower(w.build_dag(), "dense");
  LayoutRewrite r = lower_with_prepack(packed_dense_schedule(dense, 16, true).func());
  ASSERT_EQ(r.packed.size(), 1u);
  EXPECT_EQ(r.packed[0].packed->shape, (std::vector<int64_t>{2, 16, 16}));
  PackedRun run = run_packed(dense, r, 8);
  EXPECT_LT(relative_l2_error(run.out, run.want), 1e-6);
}

// Weights that may change between calls keep being copied by the kernel; so do
// constants the program reads without copying them.
TEST(LayoutRewrite, OtherProgramsAreLeftAlone) {
  PrimFunc changing = te::lower(dense_workload(6, 20, 16, false).build_dag(), "dense");
  LayoutRewrite r = lower_with_prepack(packed_dense_schedule(changing, 8, false).func());
  EXPECT_TRUE(r.packed.empty());
  EXPECT_FALSE(r.prepack.has_value());
  EXPECT_EQ(r.kernel.params, changing.params);

  PrimFunc constant = te::lower(dense_workload(6, 20, 16, true).build_dag(), "dense");
  LayoutRewrite direct = lower_with_prepack(constant);
  EXPECT_TRUE(direct.packed.empty());
  EXPECT_EQ(direct.kernel.params, constant.params);
}

}  // namespace
}  // namespace kiln::ir
