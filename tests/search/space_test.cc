// Every sketch of every example workload, sampled and mutated, yields a legal program
// whose interpreter output equals the unscheduled program's; realizing is
// deterministic for a seed; full traces replay to the same program.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "ir/annotations.h"
#include "ir/functor.h"
#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "ir/schedule/analysis.h"
#include "ir/structural.h"
#include "ops/examples.h"
#include "search/components.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::search {
namespace {

using ir::HostTensor;

Target cpu_target() { return Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2"); }

// A 2-D convolution (NCHW, bias) followed by a ReLU, as an ONNX export has it.
ops::Workload conv_relu(std::vector<int64_t> input, std::vector<int64_t> weight, int64_t pad, int64_t stride = 1) {
  auto f32 = [](std::vector<int64_t> shape) { return nlohmann::json{{"dtype", "float32"}, {"shape", shape}}; };
  nlohmann::json w = {{"kiln_workload", 1},
                      {"inputs", {f32(input), f32(weight), f32({weight[0]})}},
                      {"ops",
                       {{{"op", "conv2d"},
                         {"args", {"in0", "in1", "in2"}},
                         {"attrs", {{"strides", {stride, stride}}, {"pads", {pad, pad, pad, pad}}, {"groups", 1}}}},
                        {{"op", "relu"}, {"args", {"op0"}}, {"attrs", nlohmann::json::object()}}}},
                      {"outputs", {"op1"}}};
  return ops::Workload::from_json(w);
}

// Random float inputs in [0.1, 2] for each input of the DAG.
std::vector<HostTensor> positive_inputs(const te::ComputeDAG &dag, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, 0.1, 2.0);
  }
  return inputs;
}

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
        ASSERT_LE(ir::relative_l2_error(got[o], want[o]), 1e-5)
            << what << "\ntrace: " << c.trace.to_json().dump() << "\n"
            << ir::to_string(c.func);
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
  ops::Workload w = ops::Workload::single("matmul", {{{64, 64}, ir::DType::kFloat32}, {{64, 64}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(cpu_target()), 1);
  // Accumulator + packed B panel, accumulator only, plain tiling, and accumulator +
  // a B panel packed once for every row tile (its column tile outermost).
  ASSERT_EQ(sketches.size(), 4u);
  std::string first = sketches[0].to_json().dump();
  EXPECT_NE(first.find("sample_perfect_tile"), std::string::npos);
  EXPECT_NE(first.find("cache_write"), std::string::npos);
  EXPECT_NE(first.find("reverse_compute_at"), std::string::npos);
  EXPECT_NE(first.find("cache_read"), std::string::npos);
  EXPECT_EQ(sketches[1].to_json().dump().find("cache_read"), std::string::npos);
  EXPECT_NE(sketches[1].to_json().dump().find("cache_write"), std::string::npos);
  EXPECT_EQ(sketches[2].to_json().dump().find("cache_write"), std::string::npos);
  // The panel-once sketch packs at the column tile and runs the row tiles inside it.
  ir::Schedule once = ir::Schedule::replay(func, sketches[3]);
  std::string program = ir::to_string(once.func());
  size_t columns = program.find("for j_0"), rows = program.find("for i_0"), pack = program.find("block in1_local");
  ASSERT_NE(columns, std::string::npos) << program;
  EXPECT_LT(columns, rows) << program;
  EXPECT_LT(pack, rows) << "packed before the row tiles\n" << program;
}

// A reduction of 1024 or more also gets a sketch with the reduction blocked outside
// the register tiles (S0 Rb S1 R0 S2 R1 S3, the output accumulating across blocks, the
// panel packed per block). Its candidates are legal and compute the same result, for a
// matrix product and for a padded convolution whose ReLU stays a separate nest.
TEST(SearchSpace, LongReductionsGetABlockedSketchWithCorrectCandidates) {
  std::vector<ops::Workload> workloads = {
      ops::Workload::single("matmul", {{{8, 1024}, ir::DType::kFloat32}, {{1024, 16}, ir::DType::kFloat32}}),
      conv_relu({1, 128, 4, 4}, {8, 128, 3, 3}, 1)};
  Target target = cpu_target();
  auto post = default_postprocessors(target);
  for (const ops::Workload &w : workloads) {
    te::ComputeDAG dag = w.build_dag();
    ir::PrimFunc func = te::lower(dag, "long_reduction");
    std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(target), 1);
    std::vector<const ir::Trace *> blocked;
    for (const ir::Trace &t : sketches) {
      for (const auto &ins : t.instructions)
        if (ins.kind == &ir::instructions::kSamplePerfectTile && ins.attrs.value("n", 0) == 3) {
          blocked.push_back(&t);
          break;
        }
    }
    ASSERT_FALSE(blocked.empty()) << w.to_json().dump();
    std::vector<HostTensor> inputs = positive_inputs(dag, 3);
    std::vector<HostTensor> want = ir::interpret(func, inputs);
    int realized = 0;
    for (const ir::Trace *sketch : blocked) {
      for (uint64_t seed = 0; seed < 40 && realized < 6; ++seed) {
        std::optional<Candidate> c = realize(func, *sketch, post, seed);
        if (!c) continue;
        ++realized;
        std::vector<HostTensor> got = ir::interpret(c->func, inputs);
        ASSERT_LE(ir::relative_l2_error(got[0], want[0]), 1e-5) << c->trace.to_json().dump();
      }
    }
    EXPECT_GT(realized, 0) << w.to_json().dump();
  }
  // A short reduction keeps the three sketches of GemmSketchTilesWithRegisterAccumulator.
}

// The untuned default (a model step without a database record) moves a convolution's
// innermost spatial axis below its kernel window and vectorizes it: NHWC's output
// channels, NCHW's columns. Its program computes what the unscheduled one does.
TEST(SearchSpace, UntunedDefaultVectorizesTheInnermostOutputAxis) {
  for (const Target &target : {cpu_target(), Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2")})
    for (bool nhwc : {true, false}) {
      ops::Workload w = conv_relu({1, 8, 6, 16}, {32, 8, 3, 3}, 1);
      if (nhwc) {
        nlohmann::json j = w.to_json();
        j["inputs"][0]["shape"] = {1, 6, 16, 8};
        j["inputs"][1]["shape"] = {3, 3, 8, 32};
        j["ops"][0]["attrs"]["layout"] = "NHWC";
        w = ops::Workload::from_json(j);
      }
      te::ComputeDAG dag = w.build_dag();
      ir::PrimFunc func = te::lower(dag, "conv");
      // As kiln compile takes it: the first sketch that realizes (padding inlined).
      std::optional<Candidate> c;
      for (const ir::Trace &sketch : generate_sketches(func, untuned_rules(target), 0))
        if (!c) c = realize(func, sketch, default_postprocessors(target), 0);
      ASSERT_TRUE(c.has_value());
      const size_t vector_axis = 3;  // the output's last: NHWC's channels, NCHW's columns
      bool vectorized = false;
      for (const ir::BlockNode *b : ir::sched::all_blocks(c->func)) {
        if (b->name != "conv2d") continue;
        std::vector<ir::Stmt> loops = ir::sched::loops_above(c->func, b);
        ASSERT_FALSE(loops.empty());
        const auto *inner = loops.back().as<ir::ForNode>();
        vectorized = inner->for_kind == ir::ForKind::kVectorized &&
                     ir::uses_var(b->iter_values[vector_axis], inner->loop_var.get());
      }
      EXPECT_TRUE(vectorized) << (nhwc ? "NHWC " : "NCHW ") << target.str() << "\n" << ir::to_string(c->func);
      std::vector<HostTensor> inputs = positive_inputs(dag, 3);
      EXPECT_LE(ir::relative_l2_error(ir::interpret(c->func, inputs)[0], ir::interpret(func, inputs)[0]), 1e-5);
    }
}

// Plain tiling computes an element-wise consumer per S1 tile, so the intermediate
// output is compacted to the tile instead of making a second pass over a full-size
// buffer (a 1x1 convolution's 3.2 MB, written and read back).
TEST(SearchSpace, PlainTilingComputesTheEpiloguePerTile) {
  ops::Workload w = conv_relu({1, 16, 8, 8}, {32, 16, 1, 1}, 0);
  ir::PrimFunc func = te::lower(w.build_dag(), "pointwise");
  Target target = cpu_target();
  std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(target), 1);
  auto post = default_postprocessors(target);
  int plain = 0;
  for (const ir::Trace &sketch : sketches) {
    std::string json = sketch.to_json().dump();
    if (json.find("cache_write") != std::string::npos) continue;  // accumulator variants fuse differently
    ++plain;
    EXPECT_NE(json.find("reverse_compute_at"), std::string::npos) << json;
    std::optional<Candidate> c;
    for (uint64_t seed = 0; seed < 50 && !c; ++seed) c = realize(func, sketch, post, seed);
    ASSERT_TRUE(c.has_value());
    ir::PrimFunc lowered = ir::lower_for_codegen(c->func);
    std::string text = ir::to_string(lowered);
    // The intermediate is allocated inside the tile loops, smaller than the output.
    size_t alloc = text.find("alloc conv2d: float32[");
    ASSERT_NE(alloc, std::string::npos) << text;
    EXPECT_EQ(text.find("alloc conv2d: float32[1, 32, 8, 8]"), std::string::npos) << text;
  }
  EXPECT_GT(plain, 0);
}

// Where the innermost output axis makes poor vectors (a row of 9, or a stride-2 row
// whose input needs shuffles), a sketch vectorizes over the output channels instead,
// with the weights packed: the convolution's innermost loop is vectorized and drives
// the channel iterator, also when the channels are no multiple of the lanes (padded
// tiles). Its candidates compute the same result. A row of whole vectors read with
// unit stride gets no such sketch.
// Realizes up to three candidates of `func`'s sketches (30 seeds each) for which `matches`
// holds, checks each against the interpreter's `want`, and returns how many there were.
template <class Predicate>
int check_matching_candidates(const ir::PrimFunc &func, const Target &target, Predicate matches,
                              const std::vector<HostTensor> &inputs, const std::vector<HostTensor> &want) {
  auto post = default_postprocessors(target);
  int found = 0;
  for (const ir::Trace &sketch : generate_sketches(func, default_rules(target), 1)) {
    for (uint64_t seed = 0; seed < 30 && found < 3; ++seed) {
      std::optional<Candidate> c = realize(func, sketch, post, seed);
      if (!c || !matches(c->func)) continue;
      ++found;
      std::vector<HostTensor> got = ir::interpret(c->func, inputs);
      EXPECT_LE(ir::relative_l2_error(got[0], want[0]), 1e-5) << c->trace.to_json().dump();
    }
  }
  return found;
}

// The conv2d block of `f` when its innermost loop is vectorized over output channels,
// with the loops above it; null otherwise.
const ir::BlockNode *channel_vectorized_conv(const ir::PrimFunc &f, std::vector<ir::Stmt> *loops_above) {
  for (const ir::BlockNode *b : ir::sched::all_blocks(f)) {
    if (b->name != "conv2d" || b->iter_vars.size() < 2) continue;
    std::vector<ir::Stmt> loops = ir::sched::loops_above(f, b);
    if (loops.empty()) return nullptr;
    const auto *inner = loops.back().as<ir::ForNode>();
    if (inner->for_kind != ir::ForKind::kVectorized || !ir::uses_var(b->iter_values[1], inner->loop_var.get()))
      return nullptr;
    *loops_above = std::move(loops);
    return b;
  }
  return nullptr;
}

TEST(SearchSpace, PoorRowsGetASketchVectorizedOverChannels) {
  Target target = cpu_target();  // 16 lanes
  auto channel_vectorized = [](const ir::PrimFunc &f) {
    std::vector<ir::Stmt> loops;
    return channel_vectorized_conv(f, &loops) != nullptr;
  };
  struct Case {
    ops::Workload workload;
    bool expected;
  };
  std::vector<Case> cases = {{conv_relu({1, 8, 9, 9}, {32, 8, 3, 3}, 1), true},
                             {conv_relu({1, 3, 20, 20}, {16, 3, 3, 3}, 1, 2), true},
                             {conv_relu({1, 8, 16, 16}, {32, 8, 3, 3}, 1), false},
                             // 67 channels, a prime past the innermost cap: padded channel tiles.
                             {conv_relu({1, 4, 7, 7}, {67, 4, 3, 3}, 1), true}};
  for (const Case &k : cases) {
    te::ComputeDAG dag = k.workload.build_dag();
    ir::PrimFunc func = te::lower(dag, "conv");
    std::vector<HostTensor> inputs = positive_inputs(dag, 5);
    std::vector<HostTensor> want = ir::interpret(func, inputs);
    int realized = check_matching_candidates(func, target, channel_vectorized, inputs, want);
    EXPECT_EQ(realized > 0, k.expected) << k.workload.to_json().dump() << " realized " << realized;
  }
}

// With the weights a constant (packed once, ahead of time), the channel-vectorized
// sketch also comes with the image's rows outermost, so the parallel loop can split the
// rows between the cores. Without constant weights the panel would be packed again for
// every row tile: no such sketch.
TEST(SearchSpace, ConstantWeightsLetTheParallelLoopSplitRows) {
  // Channel-vectorized, with the parallel loop driving the output's rows.
  auto rows_parallel = [](const ir::PrimFunc &f) {
    std::vector<ir::Stmt> loops;
    const ir::BlockNode *b = channel_vectorized_conv(f, &loops);
    if (!b || b->iter_vars.size() < 3) return false;
    for (const ir::Stmt &l : loops) {
      const auto *loop = l.as<ir::ForNode>();
      if (loop->for_kind == ir::ForKind::kParallel) return ir::uses_var(b->iter_values[2], loop->loop_var.get());
    }
    return false;
  };
  // AVX-512 (16 lanes) and AVX2 (8 lanes), 2 cores each.
  for (const Target &target : {cpu_target(), Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2")})
    for (bool constant : {true, false}) {
      SCOPED_TRACE(target.str() + (constant ? ", constant weights" : ", weights given per call"));
      ops::Workload w = conv_relu({1, 8, 28, 14}, {32, 8, 3, 3}, 1);
      w.inputs[1].constant = constant;
      te::ComputeDAG dag = w.build_dag();
      ir::PrimFunc func = te::lower(dag, "conv");
      ASSERT_EQ(func.constant_params.empty(), !constant);
      std::vector<HostTensor> inputs = positive_inputs(dag, 6);
      std::vector<HostTensor> want = ir::interpret(func, inputs);
      int found = check_matching_candidates(func, target, rows_parallel, inputs, want);
      EXPECT_EQ(found > 0, constant) << "rows-parallel channel-vectorized candidates: " << found;
    }
}

// Zero padding may be computed anywhere above the convolution, but not inside its
// register tile: there it splits the nest above the vector loop and the program runs
// scalar, seconds per call. Such candidates are rejected; others remain.
TEST(SearchSpace, ProducersStayOutOfRegisterTiles) {
  ir::PrimFunc func = te::lower(conv_relu({1, 8, 9, 9}, {32, 8, 3, 3}, 1).build_dag(), "conv");
  Target target = cpu_target();
  auto post = default_postprocessors(target);
  int realized = 0;
  for (const ir::Trace &sketch : generate_sketches(func, default_rules(target), 1)) {
    for (uint64_t seed = 0; seed < 40; ++seed) {
      std::optional<Candidate> c = realize(func, sketch, post, seed);
      if (!c) continue;
      for (const ir::BlockNode *b : ir::sched::all_blocks(c->func)) {
        auto tile = b->annotations.find(ir::annotation::kRegisterTileLoop);
        if (tile == b->annotations.end()) continue;
        ++realized;
        std::vector<ir::Stmt> loops = ir::sched::loops_above(c->func, b);
        ASSERT_LT(static_cast<size_t>(tile->second), loops.size());
        EXPECT_EQ(ir::sched::blocks_under(loops[static_cast<size_t>(tile->second)]).size(), 1u)
            << c->trace.to_json().dump();
      }
    }
  }
  EXPECT_GT(realized, 20);
}

// Accumulator tiles that fit the register file (3/4 of AVX2's 16 x 8 floats) with whole
// vectors innermost; the rest are rejected at sampling time.
TEST(SearchSpace, RegisterTilesFitTheRegisterFileAndFillVectors) {
  ops::Workload w =
      ops::Workload::single("matmul", {{{256, 256}, ir::DType::kFloat32}, {{256, 256}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  Target avx2 = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -num-cores=2");
  std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(avx2), 1);
  auto post = default_postprocessors(avx2);
  int realized = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::optional<Candidate> c = realize(func, sketches[1], post, seed);  // accumulator only
    if (!c) continue;
    ++realized;
    std::vector<std::vector<int64_t>> tiles;
    for (const auto &[i, d] : c->sketch.decisions)
      if (c->sketch.instructions[i].kind == &ir::instructions::kSamplePerfectTile)
        tiles.push_back(d.get<std::vector<int64_t>>());
    ASSERT_EQ(tiles.size(), 3u);  // i, j (4 levels), k (2 levels), in loop order
    // 14 of the 16 ymm registers: one is left for the operand vector, one for the broadcast.
    EXPECT_LE(tiles[0][2] * tiles[0][3] * tiles[1][2] * tiles[1][3], 112) << c->trace.to_json().dump();
    EXPECT_EQ(tiles[1][3] % 8, 0) << c->trace.to_json().dump();
  }
  // Rejection must leave plenty: sampling is not a search for the needle.
  EXPECT_GE(realized, 10);
}

// Zero padding is tried both inlined into the convolution and materialized.
TEST(SearchSpace, PaddingIsInlinedInOneSketchAndPlacedInAnother) {
  ops::Workload w = ops::Workload::single(
      "conv2d", {{{1, 8, 16, 16}, ir::DType::kFloat32}, {{8, 8, 3, 3}, ir::DType::kFloat32}}, {{"pads", {1, 1, 1, 1}}});
  ir::PrimFunc func = te::lower(w.build_dag(), "conv2d");
  int with_pad = 0, without_pad = 0;
  for (const ir::Trace &t : generate_sketches(func, default_rules(cpu_target()), 1)) {
    ir::Schedule s = ir::Schedule::replay(func, t);
    bool has_pad = false;
    for (const std::string &b : s.block_names()) has_pad = has_pad || b == "pad";
    ++(has_pad ? with_pad : without_pad);
  }
  EXPECT_GT(with_pad, 0);
  EXPECT_GT(without_pad, 0);
}

// A producer placed at an extent-1 outer loop leaves nothing to run in parallel.
TEST(SearchSpace, NestsSerializedByAProducerPlacementAreRejected) {
  ops::Workload w =
      ops::Workload::single("conv2d", {{{1, 16, 32, 32}, ir::DType::kFloat32}, {{16, 16, 3, 3}, ir::DType::kFloat32}},
                            {{"pads", {1, 1, 1, 1}}});
  ir::PrimFunc func = te::lower(w.build_dag(), "conv2d");
  Target target = cpu_target();
  auto post = default_postprocessors(target);
  auto place_pad_at = [&](size_t loop) {
    ir::Schedule s(func);
    ir::BlockRV conv = s.get_block("conv2d");
    s.annotate(conv, ir::annotation::kParallelExtent, 8);
    s.annotate(s.get_block("pad"), ir::annotation::kParallelExtent, 8);
    s.compute_at(s.get_block("pad"), s.get_loops(conv)[loop]);
    for (const auto &p : post)
      if (!p->apply(s)) return false;
    return true;
  };
  EXPECT_FALSE(place_pad_at(0));  // under the batch loop (extent 1)
  EXPECT_TRUE(place_pad_at(1));   // under the output-channel loop (extent 16)
}

// An innermost loop longer than the vector limit is split into whole vectors and
// vectorized (a 56-wide epilogue row: 7 x 8 lanes on AVX2), not left scalar.
// A prime number of rows and output features not a multiple of the lanes: the tiled
// sketches split both with sample_tile (the last outer tile partial), the rows' tiles
// in register-sized pieces and the features in whole vectors; their candidates and
// tile-size mutations compute the right result.
TEST(SearchSpace, ExtentsWithoutGoodFactorsGetPaddedTiles) {
  ops::Workload w = ops::Workload::single("dense", {{{37, 48}, ir::DType::kFloat32}, {{67, 48}, ir::DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "dense");
  std::vector<HostTensor> inputs = positive_inputs(dag, 5);
  std::vector<HostTensor> want = ir::interpret(func, inputs);
  for (const char *cpu : {"haswell", "skylake-avx512"}) {
    Target target = Target::parse(std::string("llvm -mtriple=x86_64-linux-gnu -mcpu=") + cpu + " -num-cores=2");
    int64_t lanes = target.vector_width_bits / 32;
    std::shared_ptr<const Mutator> mutate = mutate_tile_size();
    int tiled = 0, mutated = 0;
    for (const ir::Trace &sketch : generate_sketches(func, default_rules(target), 1)) {
      std::vector<const ir::Instruction *> padded;
      bool perfect = false;
      for (const ir::Instruction &inst : sketch.instructions) {
        if (inst.kind == &ir::instructions::kSampleTile) padded.push_back(&inst);
        perfect = perfect || inst.kind == &ir::instructions::kSamplePerfectTile;
      }
      if (padded.empty() && !perfect) continue;
      ++tiled;
      ASSERT_EQ(padded.size(), 2u) << cpu << ": rows and features\n" << sketch.to_json().dump();
      EXPECT_EQ(padded[1]->attrs.value("innermost_multiple", int64_t{0}), lanes) << cpu << ": whole vectors";
      std::mt19937_64 rng(11);
      for (uint64_t seed = 0; seed < 3; ++seed) {
        std::optional<Candidate> c = realize(func, sketch, default_postprocessors(target), seed);
        if (!c) continue;
        for (size_t i : c->trace.decided(ir::instructions::kSampleTile)) {
          const ir::Instruction &inst = c->trace.instructions[i];
          if (inst.attrs.value("innermost_multiple", int64_t{0}) > 0) {
            EXPECT_EQ(c->trace.decisions.at(i).back().get<int64_t>() % lanes, 0) << cpu;
          }
        }
        EXPECT_LE(ir::relative_l2_error(ir::interpret(c->func, inputs)[0], want[0]), 1e-5) << cpu << "\n"
                                                                                           << c->trace.to_json().dump();
        std::optional<ir::Trace> t = mutate->apply(c->sketch, rng);
        if (!t) continue;
        std::optional<Candidate> m = realize(func, *t, default_postprocessors(target), seed);
        if (!m) continue;
        ++mutated;
        EXPECT_LE(ir::relative_l2_error(ir::interpret(m->func, inputs)[0], want[0]), 1e-5) << cpu << " mutated\n"
                                                                                           << m->trace.to_json().dump();
      }
    }
    EXPECT_GT(tiled, 0) << cpu;
    EXPECT_GT(mutated, 0) << cpu;
  }
}

// One row times W[n, k]: besides the tilings over n (which gather W or pack all of it
// per call), one sketch factors the reduction's innermost loop by the lanes (rfactor)
// and tiles the partial sums with the lanes innermost; its candidates are right. With
// enough rows to reuse a packed panel there is no such sketch.
TEST(SearchSpace, MatrixVectorProductsGetASketchVectorizedAlongTheReduction) {
  auto rfactor_sketches = [](const ir::PrimFunc &func, const Target &target) {
    std::vector<ir::Trace> out;
    for (const ir::Trace &sketch : generate_sketches(func, default_rules(target), 1))
      for (const ir::Instruction &inst : sketch.instructions)
        if (inst.kind == &ir::instructions::kRfactor) out.push_back(sketch);
    return out;
  };
  ops::Workload w = ops::Workload::single(
      "dense", {{{1, 256}, ir::DType::kFloat32}, {{67, 256}, ir::DType::kFloat32}, {{67}, ir::DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "gemv");
  std::vector<HostTensor> inputs = positive_inputs(dag, 9);
  std::vector<HostTensor> want = ir::interpret(func, inputs);
  for (const char *cpu : {"haswell", "skylake-avx512"}) {
    Target target = Target::parse(std::string("llvm -mtriple=x86_64-linux-gnu -mcpu=") + cpu + " -num-cores=2");
    std::vector<ir::Trace> sketches = rfactor_sketches(func, target);
    ASSERT_EQ(sketches.size(), 1u) << cpu;
    int realized = 0;
    for (uint64_t seed = 0; seed < 4; ++seed) {
      std::optional<Candidate> c = realize(func, sketches[0], default_postprocessors(target), seed);
      if (!c) continue;
      ++realized;
      EXPECT_LE(ir::relative_l2_error(ir::interpret(c->func, inputs)[0], want[0]), 1e-5) << cpu << "\n"
                                                                                         << c->trace.to_json().dump();
      // The lanes run innermost over the partial sums, reading W along k.
      bool vector_over_lanes = false;
      ir::for_each_stmt(c->func.body, [&](const ir::Stmt &s) {
        const auto *l = s.as<ir::ForNode>();
        if (l && l->for_kind == ir::ForKind::kVectorized && l->extent % (target.vector_width_bits / 32) == 0)
          vector_over_lanes = true;
      });
      EXPECT_TRUE(vector_over_lanes) << cpu << "\n" << ir::to_string(c->func);
    }
    EXPECT_GT(realized, 0) << cpu;
  }
  ops::Workload rows =
      ops::Workload::single("dense", {{{64, 256}, ir::DType::kFloat32}, {{67, 256}, ir::DType::kFloat32}});
  EXPECT_TRUE(rfactor_sketches(te::lower(rows.build_dag(), "gemm"), cpu_target()).empty());
}

TEST(SearchSpace, LongInnermostLoopsAreVectorizedInWholeVectors) {
  ops::Workload w = ops::Workload::single("relu", {{{1, 8, 56, 56}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "relu");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -num-cores=2");
  auto vectorized_width = [&](int64_t max_vector) {
    ir::Schedule s(func);
    s.annotate(s.get_block("relu"), ir::annotation::kParallelExtent, 64);
    s.annotate(s.get_block("relu"), ir::annotation::kVectorizeExtent, max_vector);
    for (const auto &p : default_postprocessors(target)) EXPECT_TRUE(p->apply(s)) << p->name();
    std::vector<ir::LoopRV> loops = s.get_loops(s.get_block("relu"));
    ir::NodeRef<ir::ForNode> inner = s.loop(loops.back());
    return inner->for_kind == ir::ForKind::kVectorized ? inner->extent : int64_t{0};
  };
  EXPECT_EQ(vectorized_width(32), 8);
  EXPECT_EQ(vectorized_width(64), 56);
  EXPECT_EQ(vectorized_width(4), 0);  // no whole vector fits the limit
}

// An epilogue over NCHW output with a batch of one starts with a loop of extent 1; the
// channel loop behind it is parallel even when it is longer than the sampled limit
// (a regression: such nests stayed serial, a third of a 1x1 convolution's time).
TEST(SearchSpace, NestsBehindUnitLoopsAreParallel) {
  ops::Workload w = ops::Workload::single("relu", {{{1, 256, 14, 14}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "relu");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -num-cores=2");
  for (int64_t max_parallel : {2, 8, 512}) {
    ir::Schedule s(func);
    s.annotate(s.get_block("relu"), ir::annotation::kParallelExtent, max_parallel);
    for (const auto &p : default_postprocessors(target)) EXPECT_TRUE(p->apply(s)) << p->name();
    auto outer = s.loop(s.get_loops(s.get_block("relu")).front());
    EXPECT_EQ(outer->for_kind, ir::ForKind::kParallel) << "limit " << max_parallel;
    EXPECT_EQ(outer->extent, 256) << "limit " << max_parallel;
  }
}

// A residual block's epilogue (bias, the add of the shortcut, relu) with a batch of one
// fuses into the convolution's write-back in every sketch with an accumulator: no
// separate pass over the output remains (a regression: the add read its input at index 0
// of the batch axis, not at its iterator, and reverse_compute_inline refused it).
TEST(SearchSpace, ResidualEpilogueFusesIntoTheWriteBack) {
  auto f32 = [](std::vector<int64_t> shape) { return nlohmann::json{{"dtype", "float32"}, {"shape", shape}}; };
  nlohmann::json j = {{"kiln_workload", 1},
                      {"inputs", {f32({1, 32, 14, 14}), f32({32, 32, 3, 3}), f32({32}), f32({1, 32, 14, 14})}},
                      {"ops",
                       {{{"op", "conv2d"},
                         {"args", {"in0", "in1", "in2"}},
                         {"attrs", {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"groups", 1}}}},
                        {{"op", "add"}, {"args", {"op0", "in3"}}, {"attrs", nlohmann::json::object()}},
                        {{"op", "relu"}, {"args", {"op1"}}, {"attrs", nlohmann::json::object()}}}},
                      {"outputs", {"op2"}}};
  ir::PrimFunc func = te::lower(ops::Workload::from_json(j).build_dag(), "residual");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2");
  int with_accumulator = 0;
  for (const ir::Trace &t : generate_sketches(func, default_rules(target), 1)) {
    bool accumulates = false;
    for (const auto &ins : t.instructions) accumulates = accumulates || ins.kind == &ir::instructions::kCacheWrite;
    if (!accumulates) continue;
    ++with_accumulator;
    ir::Schedule s = ir::Schedule::replay(func, strip_decisions(t), {}, 1);
    std::string program = ir::to_string(s.func());
    EXPECT_EQ(program.find("alloc conv2d:"), std::string::npos)
        << "the convolution's output is still a buffer of its own:\n"
        << program;
  }
  EXPECT_GT(with_accumulator, 0);
}

// The Winograd transforms are tables written out as selects over the tile position. One
// sketch of each unrolls that position (the selects then fold in code generation), keeps
// the channels as the vector loop and fuses the output transform's residual add and
// ReLU; its candidates compute the unscheduled program's result, also where the output
// (9 x 7) is no multiple of the tile.
TEST(SearchSpace, WinogradTransformsUnrollTheirTablePositions) {
  auto f32 = [](std::vector<int64_t> shape) { return nlohmann::json{{"dtype", "float32"}, {"shape", shape}}; };
  nlohmann::json input = {{"kiln_workload", 1},
                          {"inputs", {f32({1, 9, 7, 16})}},
                          {"ops",
                           {{{"op", "winograd_input_transform"},
                             {"args", {"in0"}},
                             {"attrs", {{"output_tile", 4}, {"pads", {1, 1, 1, 1}}}}}}},
                          {"outputs", {"op0"}}};
  nlohmann::json output = {{"kiln_workload", 1},
                           {"inputs", {f32({36, 6, 16}), f32({16}), f32({1, 9, 7, 16})}},
                           {"ops",
                            {{{"op", "winograd_output_transform"},
                              {"args", {"in0", "in1"}},
                              {"attrs", {{"output_tile", 4}, {"height", 9}, {"width", 7}}}},
                             {{"op", "add"}, {"args", {"op0", "in2"}}, {"attrs", nlohmann::json::object()}},
                             {{"op", "relu"}, {"args", {"op1"}}, {"attrs", nlohmann::json::object()}}}},
                           {"outputs", {"op2"}}};
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2");
  auto post = default_postprocessors(target);
  for (const nlohmann::json &j : {input, output}) {
    te::ComputeDAG dag = ops::Workload::from_json(j).build_dag();
    ir::PrimFunc func = te::lower(dag, "transform");
    std::vector<HostTensor> inputs = positive_inputs(dag, 5);
    std::vector<HostTensor> want = ir::interpret(func, inputs);
    int unrolled = 0;
    for (const ir::Trace &sketch : generate_sketches(func, default_rules(target), 1)) {
      bool unrolls = false;
      for (const auto &ins : sketch.instructions) unrolls = unrolls || ins.kind == &ir::instructions::kUnroll;
      if (!unrolls) continue;
      for (uint64_t seed = 0; seed < 4; ++seed) {
        std::optional<Candidate> c = realize(func, sketch, post, seed);
        ASSERT_TRUE(c) << sketch.to_json().dump();
        ++unrolled;
        std::string program = ir::to_string(c->func);
        EXPECT_NE(program.find("unrolled"), std::string::npos) << program;
        EXPECT_EQ(program.find("alloc winograd_output_transform"), std::string::npos)
            << "the add and the ReLU are not fused:\n"
            << program;
        std::vector<HostTensor> got = ir::interpret(c->func, inputs);
        ASSERT_LE(ir::relative_l2_error(got[0], want[0]), 1e-5) << c->trace.to_json().dump();
      }
    }
    EXPECT_GT(unrolled, 0) << j.dump();
  }
}

// Each sketch of a pointwise convolution with a fused epilogue realizes (a regression:
// none did once, and tuning found nothing).
TEST(SearchSpace, EverySketchOfAPointwiseConvolutionRealizes) {
  ops::Workload w = conv_relu({1, 64, 56, 56}, {256, 64, 1, 1}, 0);
  ir::PrimFunc func = te::lower(w.build_dag(), "pointwise");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -num-cores=2");
  auto post = default_postprocessors(target);
  std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(target), 1);
  ASSERT_FALSE(sketches.empty());
  for (size_t k = 0; k < sketches.size(); ++k) {
    int realized = 0;
    std::string why;
    for (uint64_t seed = 0; seed < 300 && realized == 0; ++seed) {
      if (realize(func, sketches[k], post, seed)) {
        ++realized;
        continue;
      }
      ir::Schedule s = ir::Schedule::replay(func, strip_decisions(sketches[k]), {}, seed);
      for (const auto &p : post)
        if (!p->apply(s)) {
          why = p->name() + "\n" + ir::to_string(s.func());
          break;
        }
    }
    EXPECT_GT(realized, 0) << "sketch " << k << " never realizes; last rejected by " << why;
  }
}

}  // namespace
}  // namespace kiln::search
