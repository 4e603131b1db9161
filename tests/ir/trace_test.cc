// Traces are what the tuner stores and ships: their JSON form must round-trip exactly,
// replay must rebuild the same program (or, with changed decisions, a different but
// still correct one), and bad input must be rejected with a message that says why.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/interpreter.h"
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

// conv2d (padded, with bias) + relu + a row sum: blocks pad, conv2d, bias_add, relu,
// reduce_sum. Two reductions and element-wise stages give every primitive a legal use.
Workload conv_relu_sum() {
  Workload w;
  w.inputs = {f32({1, 3, 8, 8}), f32({4, 3, 3, 3}), f32({4})};
  w.ops = {OpCall{"conv2d", {{"pads", {1, 1, 1, 1}}}, {"in0", "in1", "in2"}}, OpCall{"relu", json::object(), {"op0"}},
           OpCall{"reduce_sum", {{"axes", {3}}}, {"op1"}}};
  w.outputs = {"op2"};
  return w;
}

PrimFunc program() { return te::lower(conv_relu_sum().build_dag()); }

const std::set<std::string> kEveryInstructionKind = {"get_block",
                                                     "get_loops",
                                                     "split",
                                                     "fuse",
                                                     "reorder",
                                                     "parallel",
                                                     "vectorize",
                                                     "unroll",
                                                     "bind",
                                                     "annotate",
                                                     "compute_at",
                                                     "reverse_compute_at",
                                                     "compute_inline",
                                                     "reverse_compute_inline",
                                                     "cache_read",
                                                     "cache_write",
                                                     "rfactor",
                                                     "sample_perfect_tile",
                                                     "sample_tile",
                                                     "sample_categorical",
                                                     "sample_compute_location"};

struct EveryPrimitive {
  Schedule sch;
  size_t tile_instruction;  // index of the sample_perfect_tile instruction
};

// One schedule that uses every primitive once or more, with fixed decisions.
EveryPrimitive schedule_every_primitive() {
  Schedule sch(program(), /*seed=*/7);
  BlockRV conv = sch.get_block("conv2d");
  BlockRV relu = sch.get_block("relu");
  sch.reverse_compute_inline(relu);                    // bias_add now writes relu
  sch.compute_inline(sch.get_block("pad"));            // conv2d reads in0 through a select
  BlockRV weights = sch.cache_read(conv, 1, "local");  // reads: conv2d, in0, in1
  BlockRV acc = sch.cache_write(conv, 0, "local");     // conv2d -> conv2d_local -> conv2d

  std::vector<LoopRV> loops = sch.get_loops(conv);  // i j k l rc ry rx
  size_t tile_instruction = sch.trace().instructions.size();
  std::vector<ExprRV> tiles = sch.sample_perfect_tile(loops[3], 2, 4, std::vector<int64_t>{2, 4});
  std::vector<LoopRV> l_parts = sch.split(loops[3], {Factor(tiles[0]), Factor(tiles[1])});
  sch.reorder({loops[4], l_parts[1]});  // i j k l0 rc l1 ry rx
  // Rows in tiles of 3 that do not divide 8: the last tile is partial.
  std::vector<ExprRV> row_tiles = sch.sample_tile(loops[2], 2, 0, 0, std::vector<int64_t>{3, 3});
  sch.split(loops[2], {Factor(row_tiles[0]), Factor(row_tiles[1])});
  LoopRV ij = sch.fuse({loops[0], loops[1]});
  sch.parallel(ij);
  sch.unroll(loops[6]);
  sch.vectorize(l_parts[1]);
  LoopRV at = sch.sample_compute_location(weights, /*decision=*/1);  // the fused loop's k
  sch.compute_at(weights, at);

  std::vector<LoopRV> acc_loops = sch.get_loops(acc);
  sch.reverse_compute_at(sch.get_block("bias_add"), acc_loops[2]);

  BlockRV sum = sch.get_block("reduce_sum");
  std::vector<LoopRV> sum_loops = sch.get_loops(sum);  // i j k l r3
  std::vector<LoopRV> r_parts = sch.split(sum_loops[4], {Factor(int64_t{2}), Factor(int64_t{-1})});
  BlockRV rf = sch.rfactor(r_parts[0], 0);
  std::vector<LoopRV> rf_loops = sch.get_loops(rf);
  sch.bind(rf_loops[1], "threadIdx.x");
  ExprRV depth = sch.sample_categorical({0, 16, 64}, {0.25, 0.5, 0.25}, /*decision=*/2);
  sch.annotate(ij, "pragma_auto_unroll_max_step", sch.value(depth));
  sch.annotate(sum, "meta_schedule.priority", 3);
  return {std::move(sch), tile_instruction};
}

// Random inputs for the program and the unscheduled program's outputs on them.
struct Reference {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> outputs;
};

Reference reference() {
  te::ComputeDAG dag = conv_relu_sum().build_dag();
  std::mt19937_64 rng(2024);
  Reference ref;
  for (const te::Tensor &t : dag.inputs) {
    ref.inputs.emplace_back(t.dtype(), t.shape());
    ref.inputs.back().fill_random(rng, -2.0, 2.0);
  }
  ref.outputs = interpret(program(), ref.inputs);
  return ref;
}

void expect_matches_reference(const PrimFunc &f, const Reference &ref) {
  std::vector<HostTensor> got = interpret(f, ref.inputs);
  ASSERT_EQ(got.size(), ref.outputs.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(relative_l2_error(got[i], ref.outputs[i]), 1e-5) << "output " << i << " of\n" << to_string(f);
}

std::string invalid_argument_message(const json &j) {
  try {
    Trace::from_json(j);
  } catch (const std::invalid_argument &e) {
    return e.what();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "from_json threw something other than std::invalid_argument: " << e.what();
    return "";
  }
  ADD_FAILURE() << "from_json accepted " << j.dump();
  return "";
}

// ---- round trip ----------------------------------------------------------------------------

TEST(Trace, EveryPrimitiveScheduleIsCorrect) {
  EveryPrimitive every = schedule_every_primitive();
  std::set<std::string> kinds;
  for (const Instruction &inst : every.sch.trace().instructions) kinds.insert(std::string(inst.kind->name));
  EXPECT_EQ(kinds, kEveryInstructionKind);
  // ... which is every entry of the instruction table.
  std::set<std::string> table;
  for (const InstructionKind *k : instruction_kinds()) table.insert(std::string(k->name));
  EXPECT_EQ(table, kEveryInstructionKind);
  EXPECT_EQ(every.sch.trace().decisions.size(), 4u);
  expect_matches_reference(every.sch.func(), reference());
}

TEST(Trace, JsonRoundTripIsExact) {
  EveryPrimitive every = schedule_every_primitive();
  const Trace &trace = every.sch.trace();
  std::string text = trace.to_json().dump();
  Trace parsed = Trace::from_json(json::parse(text));
  EXPECT_EQ(parsed.to_json().dump(), text);
  EXPECT_EQ(parsed.to_json(), trace.to_json());
  ASSERT_EQ(parsed.instructions.size(), trace.instructions.size());
  for (size_t i = 0; i < trace.instructions.size(); ++i) {
    EXPECT_EQ(parsed.instructions[i].kind, trace.instructions[i].kind);
    EXPECT_EQ(parsed.instructions[i].inputs, trace.instructions[i].inputs);
    EXPECT_EQ(parsed.instructions[i].attrs, trace.instructions[i].attrs);
    ASSERT_EQ(parsed.instructions[i].outputs.size(), trace.instructions[i].outputs.size());
    for (size_t k = 0; k < trace.instructions[i].outputs.size(); ++k) {
      EXPECT_EQ(parsed.instructions[i].outputs[k].name, trace.instructions[i].outputs[k].name);
      EXPECT_EQ(parsed.instructions[i].outputs[k].kind, trace.instructions[i].outputs[k].kind);
    }
  }
  EXPECT_EQ(parsed.decisions, trace.decisions);
  // Pretty-printed text parses to the same trace.
  EXPECT_EQ(Trace::from_json(json::parse(trace.to_json().dump(2))).to_json().dump(), text);
  // Floats in attributes (sample_categorical probabilities) survive text exactly.
  EXPECT_NE(text.find("[0.25,0.5,0.25]"), std::string::npos) << text;
}

TEST(Trace, ReplayRebuildsTheSameProgramAndTrace) {
  EveryPrimitive every = schedule_every_primitive();
  Trace parsed = Trace::from_json(json::parse(every.sch.trace().to_json().dump()));
  Schedule replayed = Schedule::replay(program(), parsed);
  EXPECT_TRUE(structural_equal(replayed.func(), every.sch.func())) << to_string(replayed.func());
  EXPECT_EQ(structural_hash(replayed.func()), structural_hash(every.sch.func()));
  EXPECT_EQ(replayed.trace().to_json().dump(), every.sch.trace().to_json().dump());
  // The seed only matters for undecided sampling; every decision here is recorded.
  Schedule other_seed = Schedule::replay(program(), parsed, {}, /*seed=*/12345);
  EXPECT_TRUE(structural_equal(other_seed.func(), every.sch.func()));
}

// ---- decisions -----------------------------------------------------------------------------

TEST(Trace, ReplayWithChangedTileDecisionGivesADifferentCorrectProgram) {
  EveryPrimitive every = schedule_every_primitive();
  const Trace &trace = every.sch.trace();
  ASSERT_EQ(trace.instructions[every.tile_instruction].kind, &instructions::kSamplePerfectTile);
  ASSERT_EQ(trace.decisions.at(every.tile_instruction), json::array({2, 4}));
  Reference ref = reference();

  for (const json &decision : {json::array({4, 2}), json::array({8, 1})}) {
    Schedule changed = Schedule::replay(program(), trace, {{every.tile_instruction, decision}});
    EXPECT_FALSE(structural_equal(changed.func(), every.sch.func())) << "decision " << decision.dump();
    EXPECT_EQ(changed.trace().decisions.at(every.tile_instruction), decision);
    EXPECT_EQ(changed.trace().instructions.size(), trace.instructions.size());
    expect_matches_reference(changed.func(), ref);
    // The changed trace replays to the changed program.
    Schedule again = Schedule::replay(program(), changed.trace());
    EXPECT_TRUE(structural_equal(again.func(), changed.func()));
  }
}

TEST(Trace, WithDecisionReplacesOneDecisionInACopy) {
  EveryPrimitive every = schedule_every_primitive();
  const Trace &trace = every.sch.trace();
  std::string before = trace.to_json().dump();
  Trace changed = trace.with_decision(every.tile_instruction, json::array({4, 2}));
  EXPECT_EQ(trace.to_json().dump(), before) << "with_decision modified the original";
  EXPECT_EQ(changed.decisions.at(every.tile_instruction), json::array({4, 2}));
  EXPECT_EQ(changed.decisions.size(), trace.decisions.size());
  for (const auto &[index, decision] : trace.decisions) {
    if (index != every.tile_instruction) {
      EXPECT_EQ(changed.decisions.at(index), decision);
    }
  }
  EXPECT_EQ(changed.to_json()["instructions"], trace.to_json()["instructions"]);

  Schedule via_trace = Schedule::replay(program(), changed);
  Schedule via_override = Schedule::replay(program(), trace, {{every.tile_instruction, json::array({4, 2})}});
  EXPECT_TRUE(structural_equal(via_trace.func(), via_override.func()));
  EXPECT_EQ(via_trace.trace().to_json().dump(), via_override.trace().to_json().dump());
  expect_matches_reference(via_trace.func(), reference());
}

TEST(Trace, ReplayWithChangedCategoricalAndComputeLocationDecisions) {
  EveryPrimitive every = schedule_every_primitive();
  const Trace &trace = every.sch.trace();
  std::map<size_t, json> overrides;
  for (const auto &[index, decision] : trace.decisions) {
    const InstructionKind *kind = trace.instructions[index].kind;
    if (kind == &instructions::kSampleCategorical) overrides[index] = 0;
    if (kind == &instructions::kSampleComputeLocation) overrides[index] = -1;  // stay at the root
  }
  ASSERT_EQ(overrides.size(), 2u);
  Schedule changed = Schedule::replay(program(), trace, overrides);
  EXPECT_FALSE(structural_equal(changed.func(), every.sch.func()));
  expect_matches_reference(changed.func(), reference());
}

// A producer computed inside an unrolled loop would be copied into every unrolled
// iteration: sampling never offers such a location, and a decision naming one is refused.
TEST(Trace, ComputeLocationsStopAboveAnUnrolledLoop) {
  auto locations = [](bool unroll_rows) {
    Schedule sch(program(), 0);
    BlockRV pad = sch.get_block("pad");
    std::vector<LoopRV> conv_loops = sch.get_loops(sch.get_block("conv2d"));  // n o h w rc ry rx
    if (unroll_rows) sch.unroll(conv_loops[2]);
    int64_t count = 0;
    while (true) {
      Schedule probe = sch;
      try {
        probe.sample_compute_location(pad, count);
      } catch (const ScheduleError &) {
        return count;
      }
      ++count;
    }
  };
  EXPECT_GT(locations(false), 2);
  EXPECT_EQ(locations(true), 2);  // n and o, above the unrolled h

  for (uint64_t seed = 0; seed < 32; ++seed) {
    Schedule sch(program(), seed);
    std::vector<LoopRV> conv_loops = sch.get_loops(sch.get_block("conv2d"));
    sch.unroll(conv_loops[2]);
    sch.sample_compute_location(sch.get_block("pad"));
    const int64_t chosen = sch.trace().decisions.rbegin()->second.get<int64_t>();
    EXPECT_LT(chosen, 2) << "seed " << seed;
  }
}

// ---- rejected input ------------------------------------------------------------------------

TEST(Trace, FromJsonRejectsWrongVersion) {
  json j = schedule_every_primitive().sch.trace().to_json();
  j["kiln_trace"] = 2;
  std::string message = invalid_argument_message(j);
  EXPECT_NE(message.find("version 2 is not supported"), std::string::npos) << message;
  EXPECT_NE(message.find("reads version 1"), std::string::npos) << message;

  j.erase("kiln_trace");
  message = invalid_argument_message(j);
  EXPECT_NE(message.find("version"), std::string::npos) << message;

  j["kiln_trace"] = "1";
  message = invalid_argument_message(j);
  EXPECT_NE(message.find("kiln_trace"), std::string::npos) << message;
}

TEST(Trace, FromJsonRejectsMalformedInstructionRows) {
  auto with_rows = [](json rows) { return json{{"kiln_trace", 1}, {"instructions", std::move(rows)}}; };
  std::string good_row = R"(["get_block", [], {"name": "conv2d"}, ["b0"]])";
  ASSERT_NO_THROW(Trace::from_json(with_rows(json::array({json::parse(good_row)}))));

  struct Case {
    json rows;
    std::string fragment;
  };
  std::vector<Case> cases = {
      {json::array({json::array({"get_block", json::array(), json::object()})}),
       "instruction 0 is not [kind, inputs, attrs, outputs]"},
      {json::array({json::parse(good_row), json::array({1, json::array(), json::object(), json::array()})}),
       "instruction 1 is not [kind, inputs, attrs, outputs]"},
      {json::array({json::array({"split", "l0", json::object(), json::array()})}), "instruction 0 is not"},
      {json::array({json::array({"split", json::array(), json::array(), json::array()})}), "instruction 0 is not"},
      {json::array({json::array({"get_block", json::array(), json::object(), json::array({3})})}),
       "instruction 0 has a non-string output"},
      {json::array({"get_block"}), "instruction 0 is not"},
      {json{{"0", json::parse(good_row)}}, "\"instructions\" array"},
      {json(5), "\"instructions\" array"},
  };
  for (const Case &c : cases) {
    std::string message = invalid_argument_message(with_rows(c.rows));
    EXPECT_NE(message.find(c.fragment), std::string::npos) << "rows " << c.rows.dump() << " gave: " << message;
  }
  EXPECT_NE(invalid_argument_message(json::array()).find("JSON object"), std::string::npos);
}

TEST(Trace, FromJsonRejectsMalformedDecisions) {
  json base = schedule_every_primitive().sch.trace().to_json();
  size_t n = base["instructions"].size();
  struct Case {
    json decisions;
    std::string fragment;
  };
  std::vector<Case> cases = {
      {json::array({json::array({n, json::array({2, 4})})}), "refers to instruction " + std::to_string(n)},
      {json::array({json::array({0})}), "not [index, value]"},
      {json::array({json::array({-1, 0})}), "not [index, value]"},
      {json::array({json::array({"3", 0})}), "not [index, value]"},
      {json::array({7}), "not [index, value]"},
      {json::object(), "\"decisions\" must be an array"},
  };
  for (const Case &c : cases) {
    json j = base;
    j["decisions"] = c.decisions;
    std::string message = invalid_argument_message(j);
    EXPECT_NE(message.find(c.fragment), std::string::npos) << c.decisions.dump() << " gave: " << message;
  }
  // Decisions built in C++ (signed integer indices) are as good as parsed ones.
  EveryPrimitive every = schedule_every_primitive();
  json j = base;
  j["decisions"] = json::array();
  for (const auto &[index, d] : every.sch.trace().decisions)
    j["decisions"].push_back(json::array({static_cast<int>(index), d}));
  EXPECT_EQ(Trace::from_json(j).to_json().dump(), base.dump());
}

TEST(Trace, ReplayOnProgramWithoutTheBlockNamesIt) {
  EveryPrimitive every = schedule_every_primitive();
  // The same trace on a plain conv2d: there is no relu, bias_add or reduce_sum.
  PrimFunc conv_only = te::lower(
      Workload::single("conv2d", {f32({1, 3, 8, 8}), f32({4, 3, 3, 3})}, {{"pads", {1, 1, 1, 1}}}).build_dag());
  try {
    Schedule::replay(conv_only, every.sch.trace());
    FAIL() << "replay succeeded without a relu block";
  } catch (const ScheduleError &e) {
    EXPECT_EQ(e.primitive, "get_block");
    std::string message = e.what();
    EXPECT_NE(message.find("no block named 'relu'"), std::string::npos) << message;
    EXPECT_NE(message.find("blocks are: pad, conv2d"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace kiln::ir
