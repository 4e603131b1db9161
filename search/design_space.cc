#include "search/space.h"

#include <iterator>

#include "support/parallel.h"

namespace kiln::search {

std::vector<ir::Trace> generate_sketches(const ir::PrimFunc &func, const RuleList &rules, uint64_t seed) {
  std::vector<ir::Schedule> states = {ir::Schedule(func, seed)};
  std::vector<std::string> blocks = states[0].block_names();
  // Consumers first: a producer's rules see where its consumers went.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    for (const auto &rule : rules) {
      std::vector<ir::Schedule> next;
      for (ir::Schedule &s : states) {
        std::vector<ir::Schedule> out = rule->apply(std::move(s), *it);
        next.insert(next.end(), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
      }
      states = std::move(next);
    }
  }
  std::vector<ir::Trace> sketches;
  for (const ir::Schedule &s : states) sketches.push_back(strip_decisions(s.trace()));
  return sketches;
}

ir::Trace strip_decisions(const ir::Trace &trace) {
  ir::Trace t = trace;
  t.decisions.clear();
  return t;
}

std::optional<Candidate> realize(const ir::PrimFunc &func, const ir::Trace &sketch,
                                 const PostprocessorList &postprocessors, uint64_t seed) {
  // A mutated decision may no longer apply (a tiling the loop does not have).
  std::optional<ir::Schedule> sch = ir::Schedule::try_replay(func, sketch, seed);
  if (!sch) return std::nullopt;
  Candidate c;
  c.sketch = sch->trace();
  for (const auto &p : postprocessors)
    if (!p->apply(*sch)) return std::nullopt;
  c.trace = sch->trace();
  c.func = sch->func();
  return c;
}

// Replay dominates the search's own time (hundreds of replays per batch, each ~ms) and
// nothing else runs while the search does: the cores would otherwise sit idle.
std::vector<std::optional<Candidate>> realize_all(const ir::PrimFunc &func, const std::vector<SeededSketch> &jobs,
                                                  const PostprocessorList &postprocessors, int threads) {
  std::vector<std::optional<Candidate>> results(jobs.size());
  support::parallel_for(jobs.size(), threads,
                        [&](size_t i) { results[i] = realize(func, jobs[i].sketch, postprocessors, jobs[i].seed); });
  return results;
}

}  // namespace kiln::search
