// Every sketch of every example workload, sampled and mutated, yields a legal program
// whose interpreter output equals the unscheduled program's; realizing is
// deterministic for a seed; full traces replay to the same program.
#include <gtest/gtest.h>

#include <random>

#include "ir/interpreter.h"
#include "ir/ops/examples.h"
#include "ir/structural.h"
#include "ir/te.h"
#include "search/space.h"

namespace kiln::search {
namespace {

using ir::HostTensor;

Target cpu_target() { return Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2"); }

class SearchSpace : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(SearchSpace, SampledAndMutatedCandidatesAreCorrect) {
  const ops::NamedWorkload &w = GetParam();
  te::ComputeDAG dag = w.workload.build_dag();
  ir::PrimFunc func = te::lower(dag, w.name);
  Target target = cpu_target();
  auto rules = default_rules(target);
  auto post = default_postprocessors(target);
  auto mutators = default_mutators(target);
  std::vector<ir::Trace> sketches = generate_sketches(func, rules, 1);
  ASSERT_FALSE(sketches.empty());

  std::mt19937_64 rng(7);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, ir::is_float(t.dtype()) ? 0.1 : -3, 2.0);
  }
  std::vector<HostTensor> want = ir::interpret(func, inputs);
  auto check = [&](const Candidate &c, const std::string &what) {
    std::vector<HostTensor> got = ir::interpret(c.func, inputs);
    for (size_t o = 0; o < got.size(); ++o) {
      if (ir::is_float(got[o].dtype())) {
        ASSERT_LE(ir::relative_l2_error(got[o], want[o]), 1e-5) << what << "\ntrace: " << c.trace.to_json().dump()
                                                                << "\n" << ir::to_string(c.func);
      } else {
        ASSERT_TRUE(ir::exactly_equal(got[o], want[o])) << what << "\ntrace: " << c.trace.to_json().dump();
      }
    }
    // The full trace alone rebuilds the program.
    ir::Schedule again = ir::Schedule::replay(func, ir::Trace::from_json(c.trace.to_json()));
    ASSERT_TRUE(ir::structural_equal(again.func(), c.func)) << what;
  };
  int realized = 0, mutated = 0;
  for (size_t s = 0; s < sketches.size(); ++s) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      std::optional<Candidate> c = realize(func, sketches[s], post, seed);
      if (!c) continue;
      ++realized;
      check(*c, "sketch " + std::to_string(s) + " seed " + std::to_string(seed));
      if (HasFatalFailure()) return;
      // Same seed, same candidate.
      std::optional<Candidate> twin = realize(func, sketches[s], post, seed);
      ASSERT_TRUE(twin && twin->trace.to_json() == c->trace.to_json());
      for (const WeightedMutator &m : mutators) {
        std::optional<ir::Trace> t = m.mutator->apply(c->sketch, rng);
        if (!t) continue;
        std::optional<Candidate> mc = realize(func, *t, post, seed);
        if (!mc) continue;
        ++mutated;
        check(*mc, "mutation " + m.mutator->name());
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(realized, 0) << "no sketch of " << w.name << " could be realized";
  RecordProperty("realized", realized);
  RecordProperty("mutated", mutated);
}

INSTANTIATE_TEST_SUITE_P(Examples, SearchSpace, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

TEST(SearchSpace, GemmSketchTilesWithRegisterAccumulator) {
  ir::Workload w = ir::Workload::single("matmul", {{{64, 64}, ir::DType::kFloat32}, {{64, 64}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(cpu_target()), 1);
  // Accumulator + packed B panel, accumulator only, plain tiling.
  ASSERT_EQ(sketches.size(), 3u);
  std::string first = sketches[0].to_json().dump();
  EXPECT_NE(first.find("sample_perfect_tile"), std::string::npos);
  EXPECT_NE(first.find("cache_write"), std::string::npos);
  EXPECT_NE(first.find("reverse_compute_at"), std::string::npos);
  EXPECT_NE(first.find("cache_read"), std::string::npos);
  EXPECT_EQ(sketches[1].to_json().dump().find("cache_read"), std::string::npos);
  EXPECT_NE(sketches[1].to_json().dump().find("cache_write"), std::string::npos);
  EXPECT_EQ(sketches[2].to_json().dump().find("cache_write"), std::string::npos);
}

}  // namespace
}  // namespace kiln::search
