// The untuned default (what a model step runs without a database record): products and
// convolutions get a register tile chosen by rule that fits the target's register file
// with its operands, in whole power-of-two vectors, and compute what the unscheduled
// program does; programs with nothing to tile keep the untuned rules.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <random>

#include "ir/interpreter.h"
#include "ir/schedule/instruction_kind.h"
#include "ops/examples.h"
#include "ops/workload.h"
#include "search/block_info.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::search {
namespace {

nlohmann::json f32(std::vector<int64_t> shape, bool constant = false) {
  nlohmann::json j{{"dtype", "float32"}, {"shape", shape}};
  if (constant) j["constant"] = true;
  return j;
}

// An NHWC convolution with constant weights and a ReLU, as the frontend makes it.
ops::Workload nhwc_conv(std::vector<int64_t> input, std::vector<int64_t> weight, int64_t pad) {
  return ops::Workload::from_json({{"kiln_workload", 1},
                                   {"inputs", {f32(input), f32(weight, true)}},
                                   {"ops",
                                    {{{"op", "conv2d"},
                                      {"args", {"in0", "in1"}},
                                      {"attrs",
                                       {{"strides", {1, 1}},
                                        {"pads", {pad, pad, pad, pad}},
                                        {"groups", 1},
                                        {"layout", "NHWC"},
                                        {"dilations", {1, 1}}}}},
                                     {{"op", "relu"}, {"args", {"op0"}}, {"attrs", nlohmann::json::object()}}}},
                                   {"outputs", {"op1"}}});
}

ops::Workload dense(int64_t rows, int64_t n, int64_t k) {
  return ops::Workload::from_json(
      {{"kiln_workload", 1},
       {"inputs", {f32({rows, k}), f32({n, k}, true)}},
       {"ops", {{{"op", "dense"}, {"args", {"in0", "in1"}}, {"attrs", nlohmann::json::object()}}}},
       {"outputs", {"op0"}}});
}

struct RegisterTile {
  int64_t vector = 0, rows = 1;
};

// The register tile a trace's tilings choose: the vector axis's innermost factor and the
// product of the other spatial tilings' S2 factors.
RegisterTile register_tile(const ir::Trace &t) {
  RegisterTile tile;
  for (const auto &[index, decision] : t.decisions) {
    const ir::Instruction &inst = t.instructions[index];
    if (inst.kind != &ir::instructions::kSamplePerfectTile && inst.kind != &ir::instructions::kSampleTile) continue;
    if (inst.attrs.value("n", 0) != 4) continue;
    auto f = decision.get<std::vector<int64_t>>();
    if (inst.attrs.contains("innermost_multiple"))
      tile.vector = f[3];
    else
      tile.rows *= f[2];
  }
  return tile;
}

TEST(UntunedSchedule, RegisterTilesFitTheFileAndComputeTheSameValues) {
  struct Case {
    const char *what;
    ops::Workload workload;
    int64_t min_accumulators_avx2;  // accumulators (vectors) at least, on AVX2
  };
  const std::vector<Case> cases = {
      // 48 channels: 3 vectors would divide them, but LLVM scalarizes a 3-vector tile.
      {"1x1 conv, 48 channels", nhwc_conv({1, 9, 9, 64}, {1, 1, 64, 48}, 0), 9},
      {"3x3 conv, 7x7 image", nhwc_conv({1, 7, 7, 32}, {3, 3, 32, 64}, 1), 7},
      {"dense, prime rows", dense(13, 64, 32), 6},
  };
  for (const char *target_text : {"llvm -mtriple=x86_64-linux-gnu -mcpu=znver2 -num-cores=2",
                                  "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2"}) {
    Target target = Target::parse(target_text);
    const int64_t lanes = vector_lanes(target), registers = vector_registers(target);
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(c.what) + " on " + target_text);
      te::ComputeDAG dag = c.workload.build_dag();
      ir::PrimFunc func = te::lower(dag, "task");
      std::optional<ir::Trace> trace = untuned_trace(func, target);
      ASSERT_TRUE(trace.has_value());
      RegisterTile tile = register_tile(*trace);
      ASSERT_GT(tile.vector, 0) << "no tiling chosen: " << trace->to_json().dump();
      ASSERT_EQ(tile.vector % lanes, 0) << trace->to_json().dump();
      const int64_t k = tile.vector / lanes;
      EXPECT_TRUE(k == 1 || k == 2 || k == 4) << k << " vectors";
      EXPECT_LE(k * (tile.rows + 1) + 1, registers) << k << " x " << tile.rows;
      if (registers == 16) {
        EXPECT_GE(k * tile.rows, c.min_accumulators_avx2) << k << " x " << tile.rows;
      }

      std::mt19937_64 rng(7);
      std::vector<ir::HostTensor> inputs;
      for (const te::Tensor &t : dag.inputs) {
        inputs.emplace_back(t.dtype(), t.shape());
        inputs.back().fill_random(rng, -1.0, 1.0);
      }
      ir::PrimFunc scheduled = untuned_schedule(func, target);
      EXPECT_LE(ir::relative_l2_error(ir::interpret(scheduled, inputs)[0], ir::interpret(func, inputs)[0]), 1e-5);
    }
  }
}

// Nothing to tile (an element-wise program): the untuned rules' program, no tiling.
TEST(UntunedSchedule, ProgramsWithoutAProductKeepTheUntunedRules) {
  ops::Workload w =
      ops::Workload::from_json({{"kiln_workload", 1},
                                {"inputs", {f32({4, 64})}},
                                {"ops", {{{"op", "relu"}, {"args", {"in0"}}, {"attrs", nlohmann::json::object()}}}},
                                {"outputs", {"op0"}}});
  ir::PrimFunc func = te::lower(w.build_dag(), "relu");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver2 -num-cores=2");
  std::optional<ir::Trace> trace = untuned_trace(func, target);
  ASSERT_TRUE(trace.has_value());
  EXPECT_EQ(register_tile(*trace).vector, 0) << trace->to_json().dump();
  std::optional<Candidate> expected;
  for (const ir::Trace &sketch : generate_sketches(func, untuned_rules(target), 0))
    if (!expected) expected = realize(func, sketch, default_postprocessors(target), 0);
  ASSERT_TRUE(expected.has_value());
  EXPECT_EQ(trace->to_json(), expected->trace.to_json());
}

}  // namespace
}  // namespace kiln::search

namespace kiln::search {
namespace {

// Runs `scheduled` (a schedule of `f`) as GPU kernels, thread by thread, on seeded
// inputs and expects the unscheduled program's outputs: exactly, or within `tolerance`
// (relative L2) where the schedule reorders a reduction (tiles of its loops).
void expect_kernels_agree(const ir::PrimFunc &f, const ir::PrimFunc &scheduled, size_t n_inputs, uint64_t seed,
                          const ir::GpuLimits &limits, double tolerance = 0) {
  ir::GpuProgram p = ir::lower_for_gpu(scheduled, limits);
  std::mt19937_64 rng(seed);
  std::vector<ir::HostTensor> all;
  for (size_t i = 0; i < f.params.size(); ++i) {
    all.push_back(ir::HostTensor::like(f.params[i]));
    if (i < n_inputs) all.back().fill_random(rng, ir::is_float(f.params[i]->dtype) ? 0.1 : -3, 2.0);
  }
  std::vector<ir::HostTensor> want =
      ir::interpret(f, std::vector<ir::HostTensor>(all.begin(), all.begin() + static_cast<long>(n_inputs)));
  std::vector<ir::HostTensor *> args;
  for (ir::HostTensor &t : all) args.push_back(&t);
  ir::interpret_gpu(p, args);
  for (size_t o = 0; o < want.size(); ++o)
    EXPECT_LE(ir::relative_l2_error(all[n_inputs + o], want[o]), tolerance) << ir::to_string(p);
}

// For a GPU, every example workload's untuned program (spatial loops over blocks of
// threads, reductions serial per thread) lowers to kernels that the interpreter, run
// thread by thread, agrees with the unscheduled program on.
TEST(UntunedGpu, EveryExampleRunsAsKernelsThatAgreeWithTheProgram) {
  Target target = Target::parse("cuda -arch=sm_87");
  ir::GpuLimits limits;
  int checked = 0;
  for (const ops::NamedWorkload &w : ops::small_example_workloads()) {
    SCOPED_TRACE(w.name);
    ir::PrimFunc f = te::lower(w.workload.build_dag(), w.name);
    std::optional<ir::Trace> trace = untuned_trace(f, target);
    ASSERT_TRUE(trace.has_value());
    ir::PrimFunc scheduled = ir::Schedule::replay(f, *trace).func();
    expect_kernels_agree(f, scheduled, w.workload.inputs.size(), 5, limits);
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace kiln::search

namespace kiln::search {
namespace {

// The GPU space's floor (auto_bind with sampled threads per block, verify_gpu,
// mutate_thread_extent): every example's sketches realize into programs that lower
// to kernels and compute what the unscheduled program does, and a mutation changes
// the threads per block.
TEST(GpuSpace, SampledProgramsRunAsKernelsAndMutationsChangeTheirThreads) {
  Target target = Target::parse("cuda -arch=sm_90");
  SearchSpace space = default_search_space(target);
  int realized = 0, mutated = 0;
  for (const ops::NamedWorkload &w : ops::small_example_workloads()) {
    SCOPED_TRACE(w.name);
    ir::PrimFunc f = te::lower(w.workload.build_dag(), w.name);
    std::vector<ir::Trace> sketches = generate_sketches(f, space.rules, 1);
    ASSERT_FALSE(sketches.empty());
    // A tiled sketch's sample may be refused (too many threads, too much shared
    // memory); the floor (the last sketch, auto_bind alone) never is.
    for (const ir::Trace &sketch : sketches) {
      for (uint64_t seed = 7; seed < 10; ++seed) {
        if (std::optional<Candidate> c = realize(f, sketch, space.postprocessors, seed)) {
          expect_kernels_agree(f, c->func, w.workload.inputs.size(), 9, ir::GpuLimits::of(1024, 49152, 255), 1e-5);
          break;
        }
      }
    }
    std::optional<Candidate> c = realize(f, sketches.back(), space.postprocessors, 7);
    ASSERT_TRUE(c.has_value());
    ++realized;
    Rng mutation_rng(3);
    auto thread_extent = std::find_if(space.mutators.begin(), space.mutators.end(),
                                      [](const auto &m) { return m.mutator->name() == "mutate_thread_extent"; });
    ASSERT_NE(thread_extent, space.mutators.end());
    if (std::optional<ir::Trace> m = thread_extent->mutator->apply(c->sketch, mutation_rng)) {
      EXPECT_NE(m->to_json().dump(), c->sketch.to_json().dump());
      EXPECT_TRUE(realize(f, *m, space.postprocessors, 7).has_value());
      ++mutated;
    }
  }
  EXPECT_GT(realized, 40);
  EXPECT_GT(mutated, 40);
}

}  // namespace
}  // namespace kiln::search
