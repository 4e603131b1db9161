// Property tests: random sequences of legal schedule primitives on every example
// workload keep the interpreter's output equal to the unscheduled program's, and every
// resulting trace survives JSON round-trip + replay to a structurally equal program.
//
// Reproduce one case:  KILN_PROPERTY_CASE=<workload>:<seed> kiln_ir_tests --gtest_filter='ScheduleProperty*'
// Change the count:    KILN_PROPERTY_SEQUENCES=<n> (default 200 per workload)
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "ir/schedule/primitives.h"
#include "ir/schedule/schedule.h"
#include "ir/structural.h"
#include "ops/examples.h"
#include "te/te.h"
#include "tests/common/random_schedule.h"

namespace kiln::ir {
namespace {

int sequences_per_workload() {
  const char *env = std::getenv("KILN_PROPERTY_SEQUENCES");
  return env ? std::atoi(env) : 200;
}

// How often each primitive was applied successfully / rejected, over the whole run.
std::map<std::string, std::pair<int, int>> &primitive_counts() {
  static std::map<std::string, std::pair<int, int>> counts;
  return counts;
}

void check_case(const ops::NamedWorkload &w, uint64_t seed) {
  te::ComputeDAG dag = w.workload.build_dag();
  PrimFunc ref_func = te::lower(dag, w.name);
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < dag.inputs.size(); ++i) {
    inputs.emplace_back(dag.inputs[i].dtype(), dag.inputs[i].shape());
    inputs.back().fill_random(rng, -2.0, 2.0);
  }
  std::vector<HostTensor> want = interpret(ref_func, inputs);

  Schedule sch(ref_func, seed);
  std::vector<std::string> applied;
  int steps = 4 + static_cast<int>(rng() % 10);
  for (int s = 0; s < steps; ++s) {
    PrimFunc before = sch.func();
    size_t trace_len = sch.trace().instructions.size();
    try {
      std::string name = test_support::random_step(sch, rng);
      applied.push_back(name);
      primitive_counts()[name].first++;
    } catch (const ScheduleError &e) {
      primitive_counts()[e.primitive].second++;
      // Illegal choice: the program must be untouched. Lookups (get_block/get_loops)
      // recorded before the failing primitive are harmless and stay in the trace.
      (void)trace_len;
      ASSERT_TRUE(structural_equal(before, sch.func()))
          << "failed primitive changed the program: " << e.what() << "\nseed " << seed << " workload " << w.name;
    }
  }
  std::ostringstream context;
  context << "\nreproduce: KILN_PROPERTY_CASE=" << w.name << ":" << seed << "\napplied:";
  for (const std::string &a : applied) context << " " << a;
  context << "\ntrace: " << sch.trace().to_json().dump() << "\nprogram:\n" << to_string(sch.func());

  std::vector<HostTensor> got;
  try {
    got = interpret(sch.func(), inputs);
  } catch (const IRError &e) {
    FAIL() << "interpreter rejected the scheduled program: " << e.what() << context.str();
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    if (is_float(got[o].dtype())) {
      double err = relative_l2_error(got[o], want[o]);
      ASSERT_LE(err, 1e-5) << "output " << o << " differs (relative L2 error " << err << ")" << context.str();
    } else {
      ASSERT_TRUE(exactly_equal(got[o], want[o])) << "integer output " << o << " differs" << context.str();
    }
  }

  // Lowering passes keep the result too.
  std::vector<HostTensor> lowered = interpret(lower_for_codegen(sch.func()), inputs);
  for (size_t o = 0; o < got.size(); ++o) {
    bool same =
        is_float(got[o].dtype()) ? relative_l2_error(lowered[o], got[o]) == 0.0 : exactly_equal(lowered[o], got[o]);
    ASSERT_TRUE(same) << "lowering changed output " << o << context.str() << "\nlowered:\n"
                      << to_string(lower_for_codegen(sch.func()));
  }

  // Trace JSON round-trip is exact, and replay rebuilds a structurally equal program.
  std::string text = sch.trace().to_json().dump();
  Trace parsed = Trace::from_json(nlohmann::json::parse(text));
  ASSERT_EQ(parsed.to_json().dump(), text) << context.str();
  PrimFunc fresh = te::lower(w.workload.build_dag(), w.name);
  Schedule replayed = Schedule::replay(fresh, parsed);
  ASSERT_TRUE(structural_equal(replayed.func(), sch.func())) << "replay differs:\n"
                                                             << to_string(replayed.func()) << context.str();
  ASSERT_EQ(structural_hash(replayed.func()), structural_hash(sch.func())) << context.str();
  ASSERT_EQ(replayed.trace().to_json().dump(), text) << context.str();
}

class ScheduleProperty : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(ScheduleProperty, RandomLegalSequencesPreserveResultsAndReplay) {
  const ops::NamedWorkload &w = GetParam();
  if (const char *only = std::getenv("KILN_PROPERTY_CASE")) {
    std::string spec(only);
    size_t colon = spec.rfind(':');
    if (spec.substr(0, colon) != w.name) GTEST_SKIP();
    check_case(w, std::stoull(spec.substr(colon + 1)));
    return;
  }
  std::hash<std::string> h;
  int n = sequences_per_workload();
  for (int i = 0; i < n; ++i) {
    check_case(w, (h(w.name) % 100000) * 1000 + static_cast<uint64_t>(i));
    if (HasFatalFailure()) return;
  }
}

// sample_compute_location lists legal locations with compute_at's checks alone
// (check_compute_at): on random programs, the check refuses exactly what compute_at refuses.
TEST_P(ScheduleProperty, ComputeAtCheckAgreesWithComputeAt) {
  const ops::NamedWorkload &w = GetParam();
  std::hash<std::string> h;
  int compared = 0;
  for (int i = 0; i < 12; ++i) {
    uint64_t seed = (h(w.name) % 100000) * 1000 + static_cast<uint64_t>(i);
    std::mt19937_64 rng(seed);
    Schedule sch(te::lower(w.workload.build_dag(), w.name), seed);
    for (int s = 0; s < 6; ++s) {
      try {
        test_support::random_step(sch, rng);
      } catch (const ScheduleError &) {
      }
    }
    const PrimFunc &f = sch.func();
    for (const BlockNode *block : sched::all_blocks(f)) {
      for (const BlockNode *other : sched::all_blocks(f)) {
        for (const Stmt &l : sched::loops_above(f, other)) {
          const Var &loop = l.as<ForNode>()->loop_var;
          std::string applied, checked;
          try {
            sched::compute_at(f, block->name, loop);
          } catch (const ScheduleError &e) {
            applied = e.what();
          }
          try {
            sched::check_compute_at(f, block->name, loop);
          } catch (const ScheduleError &e) {
            checked = e.what();
          }
          ASSERT_EQ(checked, applied) << "block " << block->name << ", loop " << loop.name() << ", seed " << seed
                                      << "\n"
                                      << to_string(f);
          if (applied.empty()) ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 0) << "no legal compute_at location was found on " << w.name;
}

// Checked after all cases ran: every primitive must have been exercised, or the
// property above proves little.
class PrimitiveCoverage : public ::testing::Environment {
 public:
  void TearDown() override {
    const auto &counts = primitive_counts();
    // Only meaningful for the full run, not for filtered or single-case runs.
    if (std::getenv("KILN_PROPERTY_CASE") || ::testing::GTEST_FLAG(filter) != "*") return;
    for (const char *p : {"split", "sample_perfect_tile+split", "fuse", "reorder", "parallel", "vectorize", "unroll",
                          "bind", "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
                          "cache_read", "cache_write", "rfactor", "sample_compute_location+compute_at", "annotate"}) {
      auto it = counts.find(p);
      int applied = it == counts.end() ? 0 : it->second.first;
      EXPECT_GE(applied, 20) << p << " was applied only " << applied << " times";
    }
    for (const auto &[name, c] : counts)
      std::printf("  %-36s applied %6d  rejected %6d\n", name.c_str(), c.first, c.second);
  }
};
const auto *const kCoverage = ::testing::AddGlobalTestEnvironment(new PrimitiveCoverage);

INSTANTIATE_TEST_SUITE_P(Examples, ScheduleProperty, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

}  // namespace
}  // namespace kiln::ir
