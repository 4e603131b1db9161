// Evolutionary search: from a population of sampled sketches and the best measured
// programs, generations of mutation scored by a cost model pick the next batch to
// measure. Programs already measured (or proposed) are never proposed again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "search/space.h"

namespace kiln::search {

struct EvolutionOptions {
  /// Candidates per generation (for a batch of at least population / 16 candidates;
  /// smaller batches, a many-task job's warm-up rounds, evolve 16 per candidate, at
  /// least 32).
  int population = 128;
  /// Rounds of mutation + selection before a batch is picked.
  int generations = 3;
  /// Share of each batch picked at random instead of by score (exploration).
  double eps_greedy = 0.05;
  /// Best measured programs that seed the initial population.
  int init_measured = 32;
  /// Programs adopted from other tasks (EvolutionarySearch::adopt) waiting to be
  /// measured: the newest this many are kept and go at the head of the next batch.
  /// 0 = adopt nothing.
  int max_adopted = 2;
  /// Threads that replay sampled and mutated programs (0: one per core). The search's
  /// results are the same for any count.
  int threads = 0;
};

/// Scores programs; higher is better (predicted normalized throughput).
using Scorer = std::function<std::vector<double>(const std::vector<ir::PrimFunc> &)>;

class EvolutionarySearch {
 public:
  /// Sketches come from `space`'s rules, samples are finished by its postprocessors and
  /// evolved by its mutators (default_search_space(target) for the defaults).
  EvolutionarySearch(ir::PrimFunc func, SearchSpace space, EvolutionOptions options, uint64_t seed);

  /// Records a measured program so it is never proposed again; `throughput` > 0 for a
  /// valid measurement (higher is better), 0 for an error. `sketch` may be empty.
  void add_measured(const ir::Trace &sketch, const ir::PrimFunc &program, const std::string &trace_json,
                    double throughput);
  /// Takes a program of another task, given as its sketch with decisions: where one of
  /// this search's sketches makes the same tiling samplings in the same order with the
  /// same attributes (a sibling task: the same operator with another epilogue, or the
  /// same operator on a shape the decisions still fit), the decisions are carried over
  /// to it along the sampling instructions the two have in common. A program that replays on this task and is new joins
  /// the head of the next batch (EvolutionOptions::max_adopted). True when it was taken.
  bool adopt(const ir::Trace &foreign_sketch);
  /// Adopted programs waiting to be measured in the next batch.
  size_t num_adopted() const { return adopted_.size(); }
  /// A program to measure at the head of the next batch (the untuned default, before a
  /// task has programs of its own); ignored when it was measured or proposed already.
  void offer_first(Candidate candidate);
  /// Up to `n` new candidates. `model_ready` false means the scores are not to be
  /// trusted: the batch is then drawn at random from the population.
  std::vector<Candidate> next_batch(int n, const Scorer &score, bool model_ready);

  size_t num_sketches() const { return sketches_.size(); }
  const PostprocessorList &postprocessors() const { return space_.postprocessors; }

 private:
  bool is_new(const Candidate &c) const;
  void remember(const Candidate &c);
  // The steps of next_batch.
  std::vector<Candidate> initial_population(int population);
  std::optional<Candidate> sample_fresh();
  /// The draws of `n` fresh samples, in the order sample_fresh makes them.
  std::vector<SeededSketch> draw_fresh(size_t n);
  const Mutator &pick_mutator();
  /// Generations of mutation and selection; every program not measured yet that any
  /// generation held goes to `unseen` with its score.
  struct Unseen;
  void evolve(std::vector<Candidate> population, int size, const Scorer &score, Unseen &unseen);
  std::vector<Candidate> pick_batch(int n, Unseen &unseen, bool model_ready);

  ir::PrimFunc func_;
  EvolutionOptions options_;
  Rng rng_;
  SearchSpace space_;
  std::vector<ir::Trace> sketches_;
  std::unordered_set<std::string> seen_traces_;
  std::unordered_set<uint64_t> seen_programs_;
  // Hashes of fully decided sketches whose replay or postprocessing failed: such a
  // sketch fails again whatever the seed, so a mutation that lands on one is not replayed.
  std::unordered_set<uint64_t> failed_sketches_;
  // The measured seeds of the last initial population, realized (by sketch hash).
  std::unordered_map<uint64_t, std::optional<Candidate>> realized_seeds_;
  std::vector<std::pair<double, ir::Trace>> measured_sketches_;  // throughput, sketch
  std::vector<Candidate> adopted_;                               // oldest first
  std::optional<Candidate> first_;                               // offer_first's, ahead of them
};

}  // namespace kiln::search
