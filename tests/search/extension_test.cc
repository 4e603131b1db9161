// A rule, a postprocessor and a mutator written here alone (no edit anywhere else)
// take part in a search through its SearchSpace: the extension point is the list.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ir/schedule/instruction_kind.h"
#include "ops/workload.h"
#include "search/evolutionary.h"
#include "te/te.h"

namespace kiln::search {
namespace {

constexpr const char *kMarker = "test.unroll_marker";

// Samples one of two values for an annotation on every block with a reduction.
class MarkReductions : public ScheduleRule {
 public:
  std::string name() const override { return "mark_reductions"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    bool reduces = false;
    for (const ir::BlockNode *b : ir::sched::all_blocks(sch.func()))
      if (b->name == block)
        for (const ir::IterVar &iv : b->iter_vars) reduces = reduces || iv.kind == ir::IterKind::kReduce;
    if (!reduces) return only(std::move(sch));
    ir::Schedule s = sch;
    ir::ExprRV value = s.sample_categorical({1, 2}, {0.5, 0.5});
    s.annotate(s.get_block(block), kMarker, value);
    return only(std::move(s));
  }
};

// Counts what it saw, and rejects nothing.
class CountSamples : public Postprocessor {
 public:
  std::string name() const override { return "count_samples"; }
  bool apply(ir::Schedule &) const override {
    ++seen;
    return true;
  }
  mutable int seen = 0;
};

// Flips the marker's decision.
class FlipMarker : public Mutator {
 public:
  std::string name() const override { return "flip_marker"; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &) const override {
    ++calls;
    for (size_t i : sketch.decided(ir::instructions::kSampleCategorical)) {
      const ir::Instruction &inst = sketch.instructions[i];
      if (inst.attrs.at("candidates") == nlohmann::json::array({1, 2}))
        return sketch.with_decision(i, 1 - sketch.decisions.at(i).get<int64_t>());
    }
    return std::nullopt;
  }
  mutable int calls = 0;
};

bool marked(const ir::PrimFunc &f) {
  for (const ir::BlockNode *b : ir::sched::all_blocks(f))
    if (b->annotations.count(kMarker)) return true;
  return false;
}

TEST(SearchExtension, ARuleAPostprocessorAndAMutatorFromOutsideTakePart) {
  ops::Workload w = ops::Workload::single("matmul", {{{64, 64}, ir::DType::kFloat32}, {{64, 64}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2");

  SearchSpace space = default_search_space(target);
  auto counter = std::make_shared<CountSamples>();
  auto flip = std::make_shared<FlipMarker>();
  space.rules.push_back(std::make_shared<MarkReductions>());
  space.postprocessors.push_back(counter);
  space.mutators.push_back({flip, 1.0});

  EvolutionOptions options;
  options.population = 16;
  options.generations = 2;
  EvolutionarySearch search(func, space, options, 5);
  Scorer score = [](const std::vector<ir::PrimFunc> &fs) { return std::vector<double>(fs.size(), 1.0); };
  std::vector<Candidate> batch = search.next_batch(8, score, true);
  ASSERT_FALSE(batch.empty());
  for (const Candidate &c : batch) EXPECT_TRUE(marked(c.func)) << ir::to_string(c.trace);
  EXPECT_GT(counter->seen, 0);
  EXPECT_GT(flip->calls, 0);

  // Without the rule, nothing carries the marker.
  EvolutionarySearch plain(func, default_search_space(target), options, 5);
  for (const Candidate &c : plain.next_batch(8, score, true)) EXPECT_FALSE(marked(c.func));
}

}  // namespace
}  // namespace kiln::search
