#include "search/evolutionary.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string_view>

#include "ir/annotations.h"
#include "ir/functor.h"
#include "ir/structural.h"
#include "search/transfer.h"

namespace kiln::search {

EvolutionarySearch::EvolutionarySearch(ir::PrimFunc func, SearchSpace space, EvolutionOptions options, uint64_t seed)
    : func_(std::move(func)), options_(options), rng_(seed), space_(std::move(space)) {
  sketches_ = generate_sketches(func_, space_.rules, seed);
}

namespace {
// The search's own block annotations (ir::annotation::kSearchPrefix) steer postprocessing but do not reach
// the generated code: two programs differing only there are the same program.
class StripSearchAnnotations : public ir::IRMutator {
 protected:
  ir::Stmt visit(const ir::BlockNode *op, const ir::Stmt &self) override {
    ir::Stmt s = ir::IRMutator::visit(op, self);
    const auto *b = s.as<ir::BlockNode>();
    ir::Annotations kept;
    for (const auto &[k, v] : b->annotations)
      if (std::string_view(k).substr(0, ir::annotation::kSearchPrefix.size()) != ir::annotation::kSearchPrefix)
        kept[k] = v;
    if (kept.size() == b->annotations.size()) return s;
    return ir::make_block(b->name, b->iter_vars, b->iter_values, b->predicate, b->init, b->body, b->alloc_buffers,
                          kept);
  }
};

// Every sampling instruction carries a decision: replay then draws nothing from its
// seed, and the sketch always realizes to the same program (or always fails).
bool fully_decided(const ir::Trace &t) {
  for (size_t i = 0; i < t.instructions.size(); ++i)
    if (t.instructions[i].kind->samples && !t.decisions.count(i)) return false;
  return true;
}

uint64_t text_hash(const std::string &text) { return std::hash<std::string>{}(text); }

uint64_t program_hash(const ir::PrimFunc &f) {
  ir::PrimFunc g = f;
  StripSearchAnnotations strip;
  g.body = strip.mutate(f.body);
  return ir::structural_hash(g);
}
}  // namespace

bool EvolutionarySearch::is_new(const Candidate &c) const {
  return !seen_traces_.count(c.trace.to_json().dump()) && !seen_programs_.count(program_hash(c.func));
}

void EvolutionarySearch::remember(const Candidate &c) {
  seen_traces_.insert(c.trace.to_json().dump());
  seen_programs_.insert(program_hash(c.func));
}

void EvolutionarySearch::add_measured(const ir::Trace &sketch, const ir::PrimFunc &program,
                                      const std::string &trace_json, double throughput) {
  seen_traces_.insert(trace_json);
  seen_programs_.insert(program_hash(program));
  if (throughput > 0 && !sketch.instructions.empty()) measured_sketches_.emplace_back(throughput, sketch);
}

// Of the sketches that sample like `foreign_sketch`, the one closest in length (an
// epilogue more or less) is tried first; the first that replays is taken, with its
// decisions as they are (a sibling of the same shape) or else fitted to this task's
// loops (another shape). When the queue is full, a fitted program makes room before a
// sibling's: a sibling's program is the stronger guess.
bool EvolutionarySearch::adopt(const ir::Trace &foreign_sketch) {
  if (options_.max_adopted <= 0) return false;
  std::vector<ir::Trace> matches;
  for (const ir::Trace &s : sketches_)
    if (std::optional<ir::Trace> t = carry_decisions(s, foreign_sketch)) matches.push_back(std::move(*t));
  auto distance = [&](const ir::Trace &t) {
    auto a = static_cast<int64_t>(t.instructions.size()), b = static_cast<int64_t>(foreign_sketch.instructions.size());
    return std::abs(a - b);
  };
  std::stable_sort(matches.begin(), matches.end(),
                   [&](const ir::Trace &a, const ir::Trace &b) { return distance(a) < distance(b); });
  std::optional<Candidate> taken;
  for (const ir::Trace &t : matches) {
    if ((taken = realize(func_, t, space_.postprocessors, rng_())) && is_new(*taken)) break;
    taken.reset();
    std::optional<ir::Trace> fitted = fit_tilings(func_, t, rng_());
    if (fitted && (taken = realize(func_, *fitted, space_.postprocessors, rng_())) && is_new(*taken)) {
      taken->fitted = true;
      break;
    }
    taken.reset();
  }
  if (!taken) return false;
  taken->adopted = true;
  adopted_.push_back(std::move(*taken));
  if (adopted_.size() > static_cast<size_t>(options_.max_adopted)) {
    auto fitted = std::find_if(adopted_.begin(), adopted_.end(), [](const Candidate &c) { return c.fitted; });
    adopted_.erase(fitted != adopted_.end() ? fitted : adopted_.begin());
  }
  return true;
}

void EvolutionarySearch::offer_first(Candidate candidate) {
  if (is_new(candidate)) first_ = std::move(candidate);
}

// Every program not measured yet that any generation held, with its score. The batch
// comes from these: the final population alone can hold nothing new once it has
// converged on the measured seeds and re-derivations of them, which ended tuning early
// as if the space were exhausted.
struct EvolutionarySearch::Unseen {
  std::vector<Candidate> candidates;
  std::vector<double> scores;
  std::unordered_set<std::string> keys;
};

// Fresh draws stop once fewer than 1 in this many realized programs is one not seen yet.
constexpr int kExhaustedRate = 16;

// The two draws are sequenced explicitly: as arguments of one call their order would
// be the compiler's (GCC and Clang differ), and so would the candidates of a seed.
std::optional<Candidate> EvolutionarySearch::sample_fresh() {
  uint64_t seed = rng_();
  const ir::Trace &sketch = sketches_[rng_() % sketches_.size()];
  return realize(func_, sketch, space_.postprocessors, seed);
}

std::vector<SeededSketch> EvolutionarySearch::draw_fresh(size_t n) {
  std::vector<SeededSketch> draws;
  for (size_t i = 0; i < n; ++i) {
    uint64_t seed = rng_();
    draws.push_back({sketches_[rng_() % sketches_.size()], seed});
  }
  return draws;
}

const Mutator &EvolutionarySearch::pick_mutator() {
  double weight_sum = 0;
  for (const WeightedMutator &m : space_.mutators) weight_sum += m.probability;
  double r = std::uniform_real_distribution<double>(0, weight_sum)(rng_);
  for (const WeightedMutator &m : space_.mutators) {
    if ((r -= m.probability) <= 0) return *m.mutator;
  }
  return *space_.mutators.back().mutator;
}

// The best measured programs, then fresh samples of every sketch until the population
// holds `population` programs not measured yet (the measured seeds are parents for
// mutation, not candidates themselves).
std::vector<Candidate> EvolutionarySearch::initial_population(int size) {
  std::vector<Candidate> population;
  std::unordered_set<std::string> in_population;
  auto add = [&](std::optional<Candidate> c) {
    if (!c) return false;
    std::string key = c->trace.to_json().dump();
    if (in_population.count(key)) return false;
    in_population.insert(key);
    population.push_back(std::move(*c));
    return true;
  };
  std::sort(measured_sketches_.begin(), measured_sketches_.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  // The best measured change little from one batch to the next: their programs are
  // kept rather than replayed again (a fully decided sketch realizes the same each time).
  std::unordered_map<uint64_t, std::optional<Candidate>> kept;
  for (int i = 0; i < options_.init_measured && i < static_cast<int>(measured_sketches_.size()); ++i) {
    const ir::Trace &sketch = measured_sketches_[i].second;
    uint64_t seed = rng_();
    if (!fully_decided(sketch)) {
      add(realize(func_, sketch, space_.postprocessors, seed));
      continue;
    }
    uint64_t key = text_hash(sketch.to_json().dump());
    auto it = realized_seeds_.find(key);
    std::optional<Candidate> c =
        it != realized_seeds_.end() ? it->second : realize(func_, sketch, space_.postprocessors, seed);
    kept.emplace(key, c);
    add(std::move(c));
  }
  realized_seeds_ = std::move(kept);
  // Drawn in chunks of what is still missing: the search then stops after the same draw,
  // and draws the same samples, as one sample at a time would.
  int fresh = 0;
  for (int tries = 0; fresh < size && tries < size * 4 && !sketches_.empty();) {
    auto chunk = static_cast<size_t>(std::min(size - fresh, size * 4 - tries));
    std::vector<std::optional<Candidate>> samples =
        realize_all(func_, draw_fresh(chunk), space_.postprocessors, options_.threads);
    tries += static_cast<int>(chunk);
    int fresh_in_chunk = 0, realized = 0;
    for (std::optional<Candidate> &c : samples) {
      realized += c ? 1 : 0;
      bool unseen = c && is_new(*c);
      if (add(std::move(c)) && unseen) ++fresh_in_chunk;
    }
    fresh += fresh_in_chunk;
    // A small space (an unrolled table: a few dozen programs) is nearly exhausted when
    // under 1 in 16 of the programs drawn is new (draws a postprocessor rejects say
    // nothing about that); drawing on cost a realization each, seconds per round.
    if (realized >= kExhaustedRate && fresh_in_chunk * kExhaustedRate < realized) break;
  }
  return population;
}

void EvolutionarySearch::evolve(std::vector<Candidate> population, int size, const Scorer &score, Unseen &unseen) {
  auto scores_of = [&](const std::vector<Candidate> &cs) {
    std::vector<ir::PrimFunc> funcs;
    for (const Candidate &c : cs) funcs.push_back(c.func);
    return score(funcs);
  };
  auto collect = [&](const std::vector<Candidate> &cs, const std::vector<double> &s) {
    for (size_t i = 0; i < cs.size(); ++i) {
      // Members kept across generations come back each time: the key check first, so
      // each program is hashed (is_new) once per batch, not once per generation.
      if (!unseen.keys.insert(cs[i].trace.to_json().dump()).second || !is_new(cs[i])) continue;
      unseen.candidates.push_back(cs[i]);
      unseen.scores.push_back(s[i]);
    }
  };
  if (!score) {
    collect(population, std::vector<double>(population.size(), 0.0));
    return;
  }
  // Each program is scored once: survivors keep their scores into the next generation
  // (the model does not change within a batch), only the children are featurized.
  std::vector<double> s = scores_of(population);
  if (options_.generations <= 0) collect(population, s);
  std::unordered_set<std::string> in_population;
  for (const Candidate &c : population) in_population.insert(c.trace.to_json().dump());
  // Fully decided sketches replayed in this batch: a mutation that lands on one again
  // would rebuild a program the population holds already, and be dropped as a duplicate.
  std::unordered_set<uint64_t> replayed;
  for (const Candidate &c : population)
    if (fully_decided(c.sketch)) replayed.insert(text_hash(c.sketch.to_json().dump()));
  for (int g = 0; g < options_.generations; ++g) {
    // Parents are drawn in proportion to their (shifted) scores; programs without
    // features score -inf and are never parents.
    double lo = std::numeric_limits<double>::infinity();
    for (double x : s)
      if (std::isfinite(x)) lo = std::min(lo, x);
    std::vector<double> w;
    for (double x : s) w.push_back(std::isfinite(x) ? x - lo + 1e-6 : 0.0);
    if (!std::isfinite(lo)) std::fill(w.begin(), w.end(), 1.0);
    std::discrete_distribution<size_t> parent(w.begin(), w.end());
    std::vector<SeededSketch> mutated;
    std::vector<std::optional<uint64_t>> keys;  // set for fully decided sketches
    for (int i = 0; i < size; ++i) {
      const Candidate &p = population[parent(rng_)];
      std::optional<ir::Trace> t = pick_mutator().apply(p.sketch, rng_);
      if (!t) continue;
      uint64_t seed = rng_();
      std::optional<uint64_t> key;
      if (fully_decided(*t)) {
        key = text_hash(t->to_json().dump());
        if (failed_sketches_.count(*key) || !replayed.insert(*key).second) continue;
      }
      mutated.push_back({std::move(*t), seed});
      keys.push_back(key);
    }
    std::vector<std::optional<Candidate>> realized =
        realize_all(func_, mutated, space_.postprocessors, options_.threads);
    std::vector<Candidate> children;
    for (size_t i = 0; i < realized.size(); ++i) {
      std::optional<Candidate> &c = realized[i];
      if (!c && keys[i]) failed_sketches_.insert(*keys[i]);
      if (c && in_population.insert(c->trace.to_json().dump()).second) children.push_back(std::move(*c));
    }
    std::vector<double> all = std::move(s);
    for (double x : scores_of(children)) all.push_back(x);
    for (Candidate &c : children) population.push_back(std::move(c));
    collect(population, all);
    // Keep the best `population` by score.
    std::vector<size_t> order(population.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a] > all[b]; });
    std::vector<Candidate> next;
    s.clear();
    for (size_t i = 0; i < order.size() && static_cast<int>(next.size()) < size; ++i) {
      next.push_back(population[order[i]]);
      s.push_back(all[order[i]]);
    }
    population = std::move(next);
  }
}

// Best by score, plus an epsilon share picked at random; never a known program; fresh
// samples where the generations held too few new programs.
std::vector<Candidate> EvolutionarySearch::pick_batch(int n, Unseen &unseen, bool model_ready) {
  std::vector<size_t> order(unseen.candidates.size());
  std::iota(order.begin(), order.end(), 0);
  if (model_ready) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return unseen.scores[a] > unseen.scores[b]; });
  } else {
    std::shuffle(order.begin(), order.end(), rng_);
  }
  int n_random = model_ready ? static_cast<int>(n * options_.eps_greedy + 0.5) : 0;
  std::vector<Candidate> batch;
  std::vector<size_t> rest;
  auto take = [&](Candidate &c) {
    if (!is_new(c)) return;  // the same program as one taken already
    remember(c);
    batch.push_back(std::move(c));
  };
  if (first_ && n > 0) take(*first_);
  first_.reset();
  // Newest first: with a batch smaller than the queue, the latest offer is the best one.
  for (auto it = adopted_.rbegin(); it != adopted_.rend() && static_cast<int>(batch.size()) < n; ++it) take(*it);
  adopted_.clear();
  for (size_t i : order) {
    if (static_cast<int>(batch.size()) >= n - n_random) {
      rest.push_back(i);
      continue;
    }
    take(unseen.candidates[i]);
  }
  std::shuffle(rest.begin(), rest.end(), rng_);
  for (size_t i : rest) {
    if (static_cast<int>(batch.size()) >= n) break;
    take(unseen.candidates[i]);
  }
  for (int tries = 0, misses = 0; !sketches_.empty() && static_cast<int>(batch.size()) < n &&
                                  tries < options_.population * 4 && misses < kExhaustedRate;
       ++tries) {
    std::optional<Candidate> c = sample_fresh();
    if (!c) continue;  // rejected: says nothing about how much of the space is left
    size_t before = batch.size();
    take(*c);
    misses = batch.size() > before ? 0 : misses + 1;
  }
  return batch;
}

std::vector<Candidate> EvolutionarySearch::next_batch(int n, const Scorer &score, bool model_ready) {
  // Picking 2 candidates out of 128 programs evolved for 3 generations costs as much as
  // picking 32: small batches evolve a population in proportion.
  if (static_cast<int>(adopted_.size()) + (first_ ? 1 : 0) >= n) {
    Unseen none;  // the batch is what is waiting: nothing to evolve
    return pick_batch(n, none, model_ready);
  }
  const int size = std::min(options_.population, std::max(32, 16 * n));
  std::vector<Candidate> population = initial_population(size);
  if (population.empty()) return {};
  Unseen unseen;
  evolve(std::move(population), size, model_ready ? score : Scorer(), unseen);
  return pick_batch(n, unseen, model_ready);
}

}  // namespace kiln::search
