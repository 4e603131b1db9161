// Every illegal use of a schedule primitive throws ScheduleError whose message names the
// primitive, the block or loop involved and the reason, and leaves the schedule exactly
// as it was: the program is structurally unchanged and no instruction is recorded.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ir/schedule/schedule.h"
#include "ir/structural.h"
#include "ops/workload.h"
#include "te/te.h"

namespace kiln::ir {

using ops::OpCall;
using ops::Workload;
namespace {

using nlohmann::json;

TensorType f32(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kFloat32}; }

PrimFunc lower(const Workload &w) { return te::lower(w.build_dag()); }

// Block "dense"; loops i (4), j (6), rk (8).
PrimFunc dense() { return lower(Workload::single("dense", {f32({4, 8}), f32({6, 8})})); }

// Blocks "dense" then "bias_add", each in its own loop nest.
PrimFunc dense_bias() { return lower(Workload::single("dense", {f32({4, 8}), f32({6, 8}), f32({6})})); }

// Block "relu", which writes the function's output.
PrimFunc relu() { return lower(Workload::single("relu", {f32({2, 3})})); }

// relu = relu(in0); exp = exp(relu); add = relu + exp: "relu" has two consumers.
PrimFunc diamond() {
  Workload w;
  w.inputs = {f32({2, 3})};
  w.ops = {OpCall{"relu", json::object(), {"in0"}}, OpCall{"exp", json::object(), {"op0"}},
           OpCall{"add", json::object(), {"op0", "op1"}}};
  w.outputs = {"op2"};
  return lower(w);
}

// add = relu(in0) + exp(in0): "add" has two producer blocks.
PrimFunc two_producers() {
  Workload w;
  w.inputs = {f32({2, 3})};
  w.ops = {OpCall{"relu", json::object(), {"in0"}}, OpCall{"exp", json::object(), {"in0"}},
           OpCall{"add", json::object(), {"op0", "op1"}}};
  w.outputs = {"op2"};
  return lower(w);
}

// concat(relu(in0) [2x3], in1 [2x2]) along axis 1: "concat" reads only part of its
// iteration space from "relu".
PrimFunc relu_concat() {
  Workload w;
  w.inputs = {f32({2, 3}), f32({2, 2})};
  w.ops = {OpCall{"relu", json::object(), {"in0"}}, OpCall{"concat", {{"axis", 1}}, {"op0", "in1"}}};
  w.outputs = {"op1"};
  return lower(w);
}

// Runs `action`, which must throw ScheduleError from `primitive` with every one of
// `fragments` in its message, and checks that program and trace are untouched.
// Returns the message for further checks.
std::string expect_rejected(Schedule &sch, const std::function<void()> &action, const std::string &primitive,
                            const std::vector<std::string> &fragments) {
  PrimFunc before = sch.func();
  size_t trace_length = sch.trace().instructions.size();
  std::string trace_before = sch.trace().to_json().dump();
  std::string message;
  try {
    action();
    ADD_FAILURE() << "expected " << primitive << " to throw ScheduleError";
    return message;
  } catch (const ScheduleError &e) {
    message = e.what();
    EXPECT_EQ(e.primitive, primitive) << message;
  }
  EXPECT_EQ(message.rfind(primitive + ": ", 0), 0u) << "message does not start with the primitive: " << message;
  for (const std::string &fragment : fragments)
    EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' missing from: " << message;
  EXPECT_TRUE(structural_equal(before, sch.func())) << "the failed " << primitive << " changed the program:\n"
                                                    << to_string(sch.func());
  EXPECT_EQ(sch.trace().instructions.size(), trace_length) << "the failed " << primitive << " recorded an instruction";
  EXPECT_EQ(sch.trace().to_json().dump(), trace_before);
  return message;
}

// ---- loop kinds ----------------------------------------------------------------------------

TEST(ScheduleErrors, VectorizeReductionLoop) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.vectorize(loops[2]); }, "vectorize",
                  {"loop 'rk'", "reduction iterator 'vrk'", "block 'dense'", "race"});
}

TEST(ScheduleErrors, ParallelReductionLoop) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.parallel(loops[2]); }, "parallel",
                  {"loop 'rk'", "reduction iterator", "block 'dense'"});
  // The same loop kind on a spatial loop is legal and still works afterwards.
  sch.parallel(loops[0]);
  EXPECT_EQ(sch.loop(loops[0])->for_kind, ForKind::kParallel);
}

// Thread blocks cannot combine their results; the threads of one block can (a
// cross-thread reduction, ir/gpu_lower.h).
TEST(ScheduleErrors, BindReductionLoopToBlockIdx) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.bind(loops[2], "blockIdx.x"); }, "bind",
                  {"loop 'rk'", "reduction iterator", "block 'dense'"});
  expect_rejected(sch, [&] { sch.bind(loops[2], "vthread.x"); }, "bind", {"loop 'rk'", "reduction iterator"});
  sch.bind(loops[2], "threadIdx.x");
  EXPECT_EQ(sch.loop(loops[2])->for_kind, ForKind::kThreadBinding);
}

TEST(ScheduleErrors, BindUnknownThreadName) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.bind(loops[0], "threadIdx.w"); }, "bind",
                  {"loop 'i'", "unknown thread 'threadIdx.w'", "threadIdx.{x,y,z}"});
  expect_rejected(sch, [&] { sch.bind(loops[1], ""); }, "bind", {"loop 'j'", "unknown thread ''"});
}

// ---- split, fuse, reorder ------------------------------------------------------------------

TEST(ScheduleErrors, SplitZeroFactor) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.split(loops[0], {Factor(int64_t{-1}), Factor(int64_t{0})});
                  },
                  "split", {"factor 0", "loop 'i' (extent 4)", "not positive"});
}

TEST(ScheduleErrors, SplitNegativeFactor) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.split(loops[1], {Factor(int64_t{2}), Factor(int64_t{-3})});
                  },
                  "split", {"factor -3", "loop 'j' (extent 6)", "not positive"});
}

TEST(ScheduleErrors, SplitFactorsWhoseProductOverflows) {
  // 4294967297 * 4294967296 wraps to 2^32 in int64: it must not pass as "covers 4".
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.split(loops[0], {Factor(int64_t{4294967297}), Factor(int64_t{4294967296})});
                  },
                  "split", {"loop 'i' (extent 4)", "multiply past 2^63"});
}

TEST(ScheduleErrors, SplitFactorsMultiplyToLessThanExtent) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.split(loops[2], {Factor(int64_t{3}), Factor(int64_t{2})});
                  },
                  "split", {"factors [3, 2]", "multiply to 6", "less than the extent", "loop 'rk' (extent 8)"});
}

TEST(ScheduleErrors, SplitWithTwoInferredFactors) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.split(loops[2], {Factor(int64_t{-1}), Factor(int64_t{2}), Factor(int64_t{-1})});
                  },
                  "split", {"at most one factor may be inferred", "loop 'rk'"});
}

TEST(ScheduleErrors, FuseNonAdjacentLoops) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.fuse({loops[0], loops[2]}); }, "fuse", {"'i'", "'rk'", "not directly nested"});
  // Listing adjacent loops inner-first is just as wrong.
  expect_rejected(sch, [&] { sch.fuse({loops[1], loops[0]}); }, "fuse", {"'j'", "'i'", "not directly nested"});
}

TEST(ScheduleErrors, ReorderLoopsFromDifferentNests) {
  Schedule sch(dense_bias());
  std::vector<LoopRV> dense_loops = sch.get_loops(sch.get_block("dense"));
  std::vector<LoopRV> bias_loops = sch.get_loops(sch.get_block("bias_add"));
  expect_rejected(sch,
                  [&] {
                    sch.reorder({bias_loops[1], dense_loops[0]});
                  },
                  "reorder", {"'j'", "'i'", "different loop nests"});
}

TEST(ScheduleErrors, ReorderLoopsSeparatedByOtherStatements) {
  Schedule sch(dense_bias());
  BlockRV dense_block = sch.get_block("dense");
  std::vector<LoopRV> loops = sch.get_loops(dense_block);
  // Moving bias_add under dense's j loop puts a sequence {rk loop, bias_add} there.
  sch.reverse_compute_at(sch.get_block("bias_add"), loops[1]);
  expect_rejected(sch,
                  [&] {
                    sch.reorder({loops[2], loops[1]});
                  },
                  "reorder", {"loop 'j' (extent 6)", "other statements", "'rk'"});
}

TEST(ScheduleErrors, ReorderListingALoopTwice) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.reorder({loops[1], loops[0], loops[1]}); }, "reorder", {"loop 'j'", "listed twice"});
}

TEST(ScheduleErrors, LoopUsedAfterItWasSplitAway) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  sch.split(loops[0], {Factor(int64_t{2}), Factor(int64_t{2})});
  expect_rejected(sch, [&] { sch.vectorize(loops[0]); }, "vectorize", {"loop 'i'", "no longer exists", "split"});
  expect_rejected(sch,
                  [&] {
                    sch.split(loops[0], {Factor(int64_t{-1}), Factor(int64_t{2})});
                  },
                  "split", {"loop 'i'", "no longer exists"});
  expect_rejected(sch, [&] { sch.reorder({loops[1], loops[0]}); }, "reorder", {"loop 'i'", "no longer exists"});
}

// ---- compute location ----------------------------------------------------------------------

TEST(ScheduleErrors, ComputeAtLoopThatMissesAConsumer) {
  Schedule sch(diamond());
  BlockRV producer = sch.get_block("relu");
  std::vector<LoopRV> exp_loops = sch.get_loops(sch.get_block("exp"));
  expect_rejected(sch, [&] { sch.compute_at(producer, exp_loops[1]); }, "compute_at",
                  {"block 'add' reads 'relu'", "not under loop 'j'", "every consumer"});
}

TEST(ScheduleErrors, ComputeAtLoopThatComesBeforeTheBlock) {
  Schedule sch(dense_bias());
  BlockRV bias = sch.get_block("bias_add");
  std::vector<LoopRV> dense_loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.compute_at(bias, dense_loops[0]); }, "compute_at",
                  {"loop 'i' (extent 4)", "comes before block 'bias_add'"});
}

TEST(ScheduleErrors, ComputeInlineReductionBlock) {
  Schedule sch(dense_bias());
  BlockRV block = sch.get_block("dense");
  expect_rejected(sch, [&] { sch.compute_inline(block); }, "compute_inline", {"block 'dense'", "reduction"});
}

TEST(ScheduleErrors, ComputeInlineFunctionOutput) {
  Schedule sch(relu());
  BlockRV block = sch.get_block("relu");
  expect_rejected(sch, [&] { sch.compute_inline(block); }, "compute_inline",
                  {"block 'relu'", "function output 'relu'", "cannot be inlined"});
}

TEST(ScheduleErrors, ReverseComputeInlineIntoReductionProducer) {
  Schedule sch(dense_bias());
  BlockRV block = sch.get_block("bias_add");
  expect_rejected(sch, [&] { sch.reverse_compute_inline(block); }, "reverse_compute_inline",
                  {"block 'bias_add'", "block 'dense'", "reduction"});
}

TEST(ScheduleErrors, ReverseComputeInlineWithSeveralProducers) {
  Schedule sch(two_producers());
  BlockRV block = sch.get_block("add");
  expect_rejected(sch, [&] { sch.reverse_compute_inline(block); }, "reverse_compute_inline",
                  {"block 'add'", "several intermediates", "single producer"});
}

TEST(ScheduleErrors, ReverseComputeAtConsumerThatDoesNotCoverItsInput) {
  Schedule sch(relu_concat());
  BlockRV consumer = sch.get_block("concat");
  std::vector<LoopRV> relu_loops = sch.get_loops(sch.get_block("relu"));
  expect_rejected(sch, [&] { sch.reverse_compute_at(consumer, relu_loops[0]); }, "reverse_compute_at",
                  {"block 'concat'", "5 positions of dimension 1 of 'relu'", "which has 3", "cover its input exactly"});
}

// ---- caching and rfactor -------------------------------------------------------------------

TEST(ScheduleErrors, CacheReadIndexOutOfRange) {
  Schedule sch(dense());
  BlockRV block = sch.get_block("dense");
  expect_rejected(sch, [&] { sch.cache_read(block, 3, "shared"); }, "cache_read",
                  {"block 'dense'", "reads 3 buffers", "read index 3 is out of range"});
  expect_rejected(sch, [&] { sch.cache_read(block, -1, "shared"); }, "cache_read",
                  {"block 'dense'", "read index -1 is out of range"});
}

TEST(ScheduleErrors, CacheWriteWhileAnotherBlockReadsInTheSameNest) {
  Schedule sch(dense_bias());
  BlockRV dense_block = sch.get_block("dense");
  std::vector<LoopRV> loops = sch.get_loops(dense_block);
  sch.reverse_compute_at(sch.get_block("bias_add"), loops[1]);
  expect_rejected(sch, [&] { sch.cache_write(dense_block, 0, "local"); }, "cache_write",
                  {"block 'bias_add' reads 'dense'", "same loop nest", "block 'dense'"});
}

TEST(ScheduleErrors, RfactorSpatialLoop) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch, [&] { sch.rfactor(loops[0], 0); }, "rfactor",
                  {"loop 'i' (extent 4)", "does not drive a reduction iterator", "block 'dense'"});
}

TEST(ScheduleErrors, RfactorLoopOfNonDivisibleSplit) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  std::vector<LoopRV> parts = sch.split(loops[2], {Factor(int64_t{-1}), Factor(int64_t{3})});  // 3 x 3 > 8
  expect_rejected(sch, [&] { sch.rfactor(parts[0], 0); }, "rfactor",
                  {"loop 'rk_0' (extent 3)", "non-divisible split", "block 'dense'"});
  expect_rejected(sch, [&] { sch.rfactor(parts[1], 0); }, "rfactor", {"loop 'rk_1'", "non-divisible split"});
}

// ---- names ---------------------------------------------------------------------------------

TEST(ScheduleErrors, UnknownBlockNameListsTheBlocks) {
  Schedule sch(dense_bias());
  expect_rejected(sch, [&] { sch.get_block("conv2d"); }, "get_block",
                  {"no block named 'conv2d'", "blocks are: dense, bias_add"});
}

TEST(ScheduleErrors, UnknownStorageScope) {
  Schedule sch(dense());
  BlockRV block = sch.get_block("dense");
  expect_rejected(sch, [&] { sch.cache_read(block, 1, "texture"); }, "cache_read",
                  {"block 'dense'", "unknown storage scope 'texture'", "global, shared or local"});
  expect_rejected(sch, [&] { sch.cache_write(block, 0, "registers"); }, "cache_write",
                  {"block 'dense'", "unknown storage scope 'registers'"});
}

// ---- sampling and replay -------------------------------------------------------------------

TEST(ScheduleErrors, SamplePerfectTileImpossibleDecision) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.sample_perfect_tile(loops[0], 2, 0, std::vector<int64_t>{3, 3});
                  },
                  "sample_perfect_tile", {"decision [3,3]", "loop 'i' (extent 4)", "perfect tiling"});
  expect_rejected(sch,
                  [&] {
                    sch.sample_perfect_tile(loops[2], 2, 2, std::vector<int64_t>{2, 4});
                  },
                  "sample_perfect_tile", {"decision [2,4]", "loop 'rk'", "innermost factor <= 2"});
}

TEST(ScheduleErrors, SampleTileImpossibleDecision) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  expect_rejected(sch,
                  [&] {
                    sch.sample_tile(loops[0], 2, 0, 0, std::vector<int64_t>{1, 3});
                  },
                  "sample_tile", {"decision [1,3]", "loop 'i' (extent 4)", "outermost factor must be 2"});
  expect_rejected(sch,
                  [&] {
                    sch.sample_tile(loops[0], 2, 0, 0, std::vector<int64_t>{-1, 5});
                  },
                  "sample_tile", {"decision [-1,5]", "inner factors must lie in [1, extent]"});
  expect_rejected(sch,
                  [&] {
                    sch.sample_tile(loops[0], 3, 0, 0, std::vector<int64_t>{-1, 3, 3});
                  },
                  "sample_tile", {"multiply to 9, more than the extent"});
  expect_rejected(sch,
                  [&] {
                    sch.sample_tile(loops[0], 2, 2, 0, std::vector<int64_t>{-1, 3});
                  },
                  "sample_tile", {"innermost factor exceeds 2"});
  // An inferred outermost factor is recorded as the value it stands for.
  std::vector<ExprRV> tiles = sch.sample_tile(loops[0], 2, 0, 0, std::vector<int64_t>{-1, 3});
  EXPECT_EQ(sch.value(tiles[0]), 2);
  EXPECT_EQ(sch.trace().decisions.rbegin()->second, json::array({2, 3}));
}

TEST(ScheduleErrors, SamplePerfectTileImpossibleDecisionOnReplay) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  std::vector<ExprRV> tiles = sch.sample_perfect_tile(loops[1], 2, 0);
  sch.split(loops[1], {Factor(tiles[0]), Factor(tiles[1])});
  const size_t sample_index = 2;  // get_block, get_loops, sample_perfect_tile
  ASSERT_EQ(sch.trace().instructions[sample_index].kind, &instructions::kSamplePerfectTile);

  PrimFunc fresh = dense();
  try {
    Schedule::replay(fresh, sch.trace(), {{sample_index, json::array({4, 2})}});
    FAIL() << "replay accepted a tiling of 6 into 4 x 2";
  } catch (const ScheduleError &e) {
    EXPECT_EQ(e.primitive, "sample_perfect_tile");
    std::string message = e.what();
    EXPECT_NE(message.find("decision [4,2]"), std::string::npos) << message;
    EXPECT_NE(message.find("loop 'j' (extent 6)"), std::string::npos) << message;
  }
  // A decision of the wrong JSON shape is a malformed instruction, not a crash.
  try {
    Schedule::replay(fresh, sch.trace(), {{sample_index, json("two by three")}});
    FAIL() << "replay accepted a string as a tiling";
  } catch (const ScheduleError &e) {
    EXPECT_EQ(e.primitive, "replay");
    EXPECT_NE(std::string(e.what()).find("instruction 2 (sample_perfect_tile)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(structural_equal(fresh, dense())) << "replay changed the program it was given";
}

TEST(ScheduleErrors, UnknownInstructionKindIsRefusedOnReading) {
  Schedule sch(dense());
  sch.get_block("dense");
  json j = sch.trace().to_json();
  j["instructions"].push_back(json::array({"tensorize", json::array({"b0"}), json::object(), json::array()}));
  try {
    Trace::from_json(j);
    FAIL() << "an unknown instruction was read";
  } catch (const std::invalid_argument &e) {
    std::string message = e.what();
    EXPECT_NE(message.find("instruction 1 has unknown kind \"tensorize\""), std::string::npos) << message;
    EXPECT_NE(message.find("sample_perfect_tile"), std::string::npos) << "the message lists the known kinds";
  }
}

TEST(ScheduleErrors, ReplayOfRandomVariableBeforeItIsDefined) {
  Trace trace;
  trace.instructions.push_back(
      Instruction{&instructions::kGetLoops, json::array({"b7"}), json::object(), {TraceRV{RVKind::kLoop, "l0"}}});
  try {
    Schedule::replay(dense(), trace);
    FAIL() << "replay accepted an undefined random variable";
  } catch (const ScheduleError &e) {
    EXPECT_EQ(e.primitive, "replay");
    EXPECT_NE(std::string(e.what()).find("'b7' before it is defined"), std::string::npos) << e.what();
  }
}

// The kind of a random variable comes from the instruction that defined it, never from
// its name: a trace whose loops are named like blocks and blocks like loops (another
// writer's naming) replays to the same program, annotations included.
TEST(ScheduleErrors, RandomVariableKindsComeFromTheirDefiningInstruction) {
  Schedule sch(dense());
  BlockRV block = sch.get_block("dense");
  std::vector<LoopRV> loops = sch.get_loops(block);
  sch.annotate(loops[0], "pragma_auto_unroll_max_step", 16);
  sch.annotate(block, "kiln.parallel", 4);
  sch.parallel(loops[0]);
  // Blocks renamed "l…", loops "b…".
  auto swap = [](const std::string &name) {
    return std::string(name[0] == 'b' ? "l" : name[0] == 'l' ? "b" : name.substr(0, 1)) + name.substr(1);
  };
  json swapped = sch.trace().to_json();
  for (json &inst : swapped["instructions"]) {
    for (json &in : inst[1])
      if (in.is_string()) in = swap(in.get<std::string>());
    for (json &out : inst[3]) out = swap(out.get<std::string>());
  }
  Trace trace = Trace::from_json(swapped);
  EXPECT_EQ(trace.instructions[0].outputs[0].kind, RVKind::kBlock);
  EXPECT_EQ(trace.instructions[0].outputs[0].name, "l0");
  Schedule replayed = Schedule::replay(dense(), trace);
  EXPECT_TRUE(structural_equal(replayed.func(), sch.func())) << to_string(replayed.func());

  // A block where the instruction needs a loop is refused, naming both kinds.
  swapped["instructions"][4][1][0] = "l0";
  try {
    Schedule::replay(dense(), Trace::from_json(swapped));
    FAIL() << "a block was made parallel";
  } catch (const ScheduleError &e) {
    EXPECT_NE(std::string(e.what()).find("expects a loop as input 0, but 'l0' is a block"), std::string::npos)
        << e.what();
  }
}

TEST(ScheduleErrors, TracesPrintOneInstructionPerLine) {
  Schedule sch(dense());
  std::vector<LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  sch.sample_perfect_tile(loops[1], 2, 0, std::vector<int64_t>{2, 3});
  std::string text = to_string(sch.trace());
  EXPECT_NE(text.find("b0 = get_block(name=\"dense\")\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" = sample_perfect_tile(l2, max_innermost_factor=0, n=2)  # decision: [2,3]\n"),
            std::string::npos)
      << text;
}

// Nesting is bounded before any recursive walk: 100k levels in an attribute used to
// overflow the stack of the integer check that reads traces and workloads.
TEST(ScheduleErrors, DeeplyNestedTracesAndWorkloadsAreRefused) {
  // Built as text: copying a deep json value would itself recurse.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    Trace::from_json(
        json::parse(R"({"kiln_trace": 1, "instructions": [["get_block", [], {"name": )" + deep + R"(}, ["b0"]]]})"));
    FAIL() << "a trace nested 100k deep was read";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("nests deeper than 64 levels"), std::string::npos) << e.what();
  }
  std::string workload = Workload::single("relu", {f32({2, 3})}).to_json().dump();
  size_t attrs = workload.find("\"attrs\":{");
  ASSERT_NE(attrs, std::string::npos) << workload;
  workload.insert(attrs + 9, "\"deep\":" + deep + (workload[attrs + 9] == '}' ? "" : ","));
  EXPECT_THROW(Workload::from_json(json::parse(workload)), std::invalid_argument);
}

TEST(ScheduleErrors, MalformedTraceJsonIsInvalidArgument) {
  EXPECT_THROW(Trace::from_json(json::array({1, 2})), std::invalid_argument);
  EXPECT_THROW(Trace::from_json(json::parse(R"({"kiln_trace": 1})")), std::invalid_argument);
  EXPECT_THROW(Trace::from_json(json::parse(R"({"kiln_trace": 1, "instructions": [["get_block", [], {}]]})")),
               std::invalid_argument);
  EXPECT_THROW(Trace::from_json(json::parse(R"({"kiln_trace": 1, "instructions": [[7, [], {}, []]]})")),
               std::invalid_argument);
}

}  // namespace
}  // namespace kiln::ir
