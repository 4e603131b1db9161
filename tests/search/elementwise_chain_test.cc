// A long chain of element-wise operators (a workload of a thousand blocks, longer than
// fusion makes them) is inlined into one block by the default and the untuned rules, and
// the program computes what the unscheduled one does. (Sketch generation hands each
// state from rule to rule without copying it, and inlining rewrites only the nests that
// read the inlined buffer; how long it takes is bench/chain_compile's to measure.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "ir/interpreter.h"
#include "ir/schedule/analysis.h"
#include "ops/workload.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::search {
namespace {

ops::Workload chain(int length) {
  nlohmann::json ops = nlohmann::json::array();
  const char *kinds[] = {"relu", "neg", "abs", "sigmoid"};
  for (int i = 0; i < length; ++i)
    ops.push_back({{"op", kinds[i % 4]},
                   {"args", {i == 0 ? std::string("in0") : "op" + std::to_string(i - 1)}},
                   {"attrs", nlohmann::json::object()}});
  return ops::Workload::from_json({{"kiln_workload", 1},
                                   {"inputs", {{{"dtype", "float32"}, {"shape", {2, 5}}}}},
                                   {"ops", ops},
                                   {"outputs", {"op" + std::to_string(length - 1)}}});
}

TEST(ElementwiseChain, AThousandBlocksInlineIntoOneThatComputesTheSame) {
  te::ComputeDAG dag = chain(1000).build_dag();
  ir::PrimFunc func = te::lower(dag, "chain");
  ASSERT_EQ(ir::sched::all_blocks(func).size(), 1000u);
  std::mt19937_64 rng(7);
  std::vector<ir::HostTensor> inputs;
  inputs.emplace_back(ir::DType::kFloat32, std::vector<int64_t>{2, 5});
  inputs.back().fill_random(rng, -2.0, 2.0);
  std::vector<ir::HostTensor> want = ir::interpret(func, inputs);

  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2");
  for (const RuleList &rules : {default_rules(target), untuned_rules(target)}) {
    std::vector<ir::Trace> sketches = generate_sketches(func, rules, 0);
    ASSERT_EQ(sketches.size(), 1u);
    std::optional<Candidate> c = realize(func, sketches[0], default_postprocessors(target), 3);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(ir::sched::all_blocks(c->func).size(), 1u) << ir::to_string(c->func);
    EXPECT_TRUE(ir::exactly_equal(ir::interpret(c->func, inputs).at(0), want.at(0)));
  }
}

}  // namespace
}  // namespace kiln::search
