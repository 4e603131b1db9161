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
#include "ir/ops/examples.h"
#include "ir/schedule/schedule.h"
#include "ir/structural.h"
#include "ir/te.h"

namespace kiln::ir {
namespace {

int sequences_per_workload() {
  const char *env = std::getenv("KILN_PROPERTY_SEQUENCES");
  return env ? std::atoi(env) : 200;
}

template <typename T>
const T &pick(std::mt19937_64 &rng, const std::vector<T> &v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

// Tries one random primitive with random arguments; returns its name. Illegal choices
// throw ScheduleError, which must leave the schedule untouched.
std::string random_step(Schedule &sch, std::mt19937_64 &rng) {
  std::vector<std::string> blocks = sch.block_names();
  BlockRV block = sch.get_block(pick(rng, blocks));
  std::vector<LoopRV> loops = sch.get_loops(block);
  auto any_loop = [&]() -> LoopRV {
    if (loops.empty()) throw ScheduleError("test", "block has no loops");
    return pick(rng, loops);
  };
  int choice = static_cast<int>(rng() % 17);
  switch (choice) {
    case 0: {  // split with literal factors, possibly non-divisible
      LoopRV l = any_loop();
      int64_t extent = sch.loop(l)->extent;
      int64_t f = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, extent))(rng);
      if (rng() % 3 == 0) {
        sch.split(l, {Factor(int64_t{-1}), Factor(f), Factor(int64_t{2})});
      } else {
        sch.split(l, {Factor(int64_t{-1}), Factor(f)});
      }
      return "split";
    }
    case 1: {  // split by a sampled perfect tile
      LoopRV l = any_loop();
      int n = 2 + static_cast<int>(rng() % 3);
      std::vector<ExprRV> tiles = sch.sample_perfect_tile(l, n, rng() % 2 ? 4 : 0);
      std::vector<Factor> factors(tiles.begin(), tiles.end());
      sch.split(l, factors);
      return "sample_perfect_tile+split";
    }
    case 2: {  // fuse a loop with the next one
      if (loops.size() < 2) return "none";
      size_t i = std::uniform_int_distribution<size_t>(0, loops.size() - 2)(rng);
      sch.fuse({loops[i], loops[i + 1]});
      return "fuse";
    }
    case 3: {  // reorder a random subset
      if (loops.size() < 2) return "none";
      std::vector<LoopRV> subset;
      for (const LoopRV &l : loops)
        if (rng() % 2) subset.push_back(l);
      if (subset.size() < 2) subset = loops;
      std::shuffle(subset.begin(), subset.end(), rng);
      sch.reorder(subset);
      return "reorder";
    }
    case 4: sch.parallel(any_loop()); return "parallel";
    case 5: sch.vectorize(any_loop()); return "vectorize";
    case 6: sch.unroll(any_loop()); return "unroll";
    case 7: sch.bind(any_loop(), rng() % 2 ? "threadIdx.x" : "blockIdx.x"); return "bind";
    case 8: {
      BlockRV other = sch.get_block(pick(rng, blocks));
      std::vector<LoopRV> other_loops = sch.get_loops(other);
      if (other_loops.empty()) return "none";
      sch.compute_at(block, pick(rng, other_loops));
      return "compute_at";
    }
    case 9: {
      BlockRV other = sch.get_block(pick(rng, blocks));
      std::vector<LoopRV> other_loops = sch.get_loops(other);
      if (other_loops.empty()) return "none";
      sch.reverse_compute_at(block, pick(rng, other_loops));
      return "reverse_compute_at";
    }
    case 10: sch.compute_inline(block); return "compute_inline";
    case 11: sch.reverse_compute_inline(block); return "reverse_compute_inline";
    case 12: sch.cache_read(block, static_cast<int>(rng() % 3), rng() % 2 ? "local" : "shared"); return "cache_read";
    case 13: sch.cache_write(block, 0, "local"); return "cache_write";
    case 14: sch.rfactor(any_loop(), static_cast<int>(rng() % 2)); return "rfactor";
    case 15: {
      LoopRV at = sch.sample_compute_location(block);
      sch.compute_at(block, at);
      return "sample_compute_location+compute_at";
    }
    default: {
      ExprRV depth = sch.sample_categorical({0, 16, 64}, {0.3, 0.4, 0.3});
      sch.annotate(any_loop(), "pragma_auto_unroll_max_step", sch.value(depth));
      return "annotate";
    }
  }
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
      std::string name = random_step(sch, rng);
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

  // Trace JSON round-trip is exact, and replay rebuilds a structurally equal program.
  std::string text = sch.trace().to_json().dump();
  Trace parsed = Trace::from_json(nlohmann::json::parse(text));
  ASSERT_EQ(parsed.to_json().dump(), text) << context.str();
  PrimFunc fresh = te::lower(w.workload.build_dag(), w.name);
  Schedule replayed = Schedule::replay(fresh, parsed);
  ASSERT_TRUE(structural_equal(replayed.func(), sch.func()))
      << "replay differs:\n" << to_string(replayed.func()) << context.str();
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
  for (const auto &[name, c] : counts) std::printf("  %-36s applied %6d  rejected %6d\n", name.c_str(), c.first, c.second);
  }
};
const auto *const kCoverage = ::testing::AddGlobalTestEnvironment(new PrimitiveCoverage);

INSTANTIATE_TEST_SUITE_P(Examples, ScheduleProperty, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

}  // namespace
}  // namespace kiln::ir
