// Carrying programs between tasks: a tiling fitted to another extent keeps what fits;
// a matmul's program carried to a matmul of other extents (tilings fitted) or to one
// with a ReLU after it (decisions as they are) computes what the interpreter computes.
#include <gtest/gtest.h>

#include <random>

#include "ir/interpreter.h"
#include "ops/workload.h"
#include "search/space.h"
#include "search/transfer.h"
#include "te/te.h"

namespace kiln::search {
namespace {

using ir::HostTensor;

TEST(FitPerfectTiling, KeepsInnerFactorsThatDivideAndShrinksTheRest) {
  EXPECT_EQ(fit_perfect_tiling({1, 16, 4, 1}, 28, 0), (std::vector<int64_t>{1, 7, 4, 1}));
  EXPECT_EQ(fit_perfect_tiling({2, 4, 1, 8}, 64, 0), (std::vector<int64_t>{2, 4, 1, 8}));  // fits already
  EXPECT_EQ(fit_perfect_tiling({1, 2, 16}, 24, 0), (std::vector<int64_t>{1, 2, 12}));
  EXPECT_EQ(fit_perfect_tiling({1, 32}, 64, 16), (std::vector<int64_t>{4, 16}));  // innermost cap
  EXPECT_EQ(fit_perfect_tiling({1, 8, 8}, 7, 0), (std::vector<int64_t>{1, 1, 7}));
  for (int64_t extent : {1, 7, 13, 56, 1001}) {
    std::vector<int64_t> f = fit_perfect_tiling({3, 5, 16}, extent, 0);
    EXPECT_EQ(f[0] * f[1] * f[2], extent);
  }
}

ops::Workload matmul(int64_t m, int64_t k, int64_t n, bool relu) {
  auto f32 = [](std::vector<int64_t> shape) { return nlohmann::json{{"dtype", "float32"}, {"shape", shape}}; };
  nlohmann::json ops = {{{"op", "matmul"}, {"args", {"in0", "in1"}}, {"attrs", nlohmann::json::object()}}};
  if (relu) ops.push_back({{"op", "relu"}, {"args", {"op0"}}, {"attrs", nlohmann::json::object()}});
  return ops::Workload::from_json({{"kiln_workload", 1},
                                   {"inputs", {f32({m, k}), f32({k, n})}},
                                   {"ops", ops},
                                   {"outputs", {relu ? "op1" : "op0"}}});
}

void expect_same_output(const ops::Workload &w, const ir::PrimFunc &reference, const Candidate &c) {
  std::mt19937_64 rng(3);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : w.build_dag().inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, -1.0, 1.0);
  }
  std::vector<HostTensor> want = ir::interpret(reference, inputs), got = ir::interpret(c.func, inputs);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(ir::relative_l2_error(got[0], want[0]), 1e-5) << ir::to_string(c.trace);
}

// Each sketch of the source realized with a few seeds, carried to the destination.
struct Carried {
  int matched = 0, strict = 0, fitted = 0;
};
Carried carry_all(const ops::Workload &from, const ops::Workload &to) {
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2");
  SearchSpace space = default_search_space(target);
  ir::PrimFunc source = te::lower(from.build_dag(), "from"), dest = te::lower(to.build_dag(), "to");
  std::vector<ir::Trace> dest_sketches = generate_sketches(dest, space.rules, 0);
  Carried n;
  for (const ir::Trace &sketch : generate_sketches(source, space.rules, 0)) {
    for (uint64_t seed = 0; seed < 3; ++seed) {
      std::optional<Candidate> program = realize(source, sketch, space.postprocessors, seed);
      if (!program) continue;
      for (const ir::Trace &mine : dest_sketches) {
        std::optional<ir::Trace> carried = carry_decisions(mine, program->sketch);
        if (!carried) continue;
        ++n.matched;
        std::optional<Candidate> c = realize(dest, *carried, space.postprocessors, seed);
        if (c) {
          ++n.strict;
        } else if (std::optional<ir::Trace> fitted = fit_tilings(dest, *carried, seed)) {
          c = realize(dest, *fitted, space.postprocessors, seed);
          if (c) ++n.fitted;
        }
        if (!c) continue;
        expect_same_output(to, dest, *c);
      }
    }
  }
  return n;
}

TEST(CarryDecisions, ToTheSameOperatorWithAnEpilogueAsTheyAre) {
  Carried n = carry_all(matmul(32, 48, 64, false), matmul(32, 48, 64, true));
  EXPECT_GT(n.matched, 0);
  EXPECT_GT(n.strict, 0);
  EXPECT_EQ(n.fitted, 0) << "same extents: no tiling needs fitting";
}

TEST(CarryDecisions, ToOtherExtentsFitted) {
  Carried n = carry_all(matmul(32, 48, 64, true), matmul(28, 40, 56, true));
  EXPECT_GT(n.matched, 0);
  EXPECT_GT(n.fitted, 0);
}

TEST(CarryDecisions, NotBetweenOperatorsThatTileDifferently) {
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2");
  SearchSpace space = default_search_space(target);
  ir::PrimFunc mm = te::lower(matmul(32, 48, 64, false).build_dag(), "mm");
  ops::Workload pool =
      ops::Workload::single("max_pool2d", {{{1, 8, 16, 16}, ir::DType::kFloat32}}, {{"kernel", {3, 3}}});
  ir::PrimFunc pooling = te::lower(pool.build_dag(), "pool");
  std::optional<Candidate> program;
  for (const ir::Trace &sketch : generate_sketches(mm, space.rules, 0))
    for (uint64_t seed = 0; seed < 4 && !program; ++seed) program = realize(mm, sketch, space.postprocessors, seed);
  ASSERT_TRUE(program);
  for (const ir::Trace &mine : generate_sketches(pooling, space.rules, 0))
    EXPECT_FALSE(carry_decisions(mine, program->sketch)) << ir::to_string(mine);
}

}  // namespace
}  // namespace kiln::search
