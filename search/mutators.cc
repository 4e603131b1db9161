// Mutators: each changes one decision of a sketch trace.
//   MutateTileSize         moves a factor between two levels of a sampled tiling
//   MutateParallel         another maximum parallel extent
//   MutateUnroll           another auto-unroll depth
//   MutateComputeLocation  another sampled compute location
#include <algorithm>

#include "search/space.h"

namespace kiln::search {
namespace {

using nlohmann::json;

std::vector<size_t> instructions_of(const ir::Trace &t, const std::string &kind) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.instructions.size(); ++i)
    if (t.instructions[i].kind == kind && t.decisions.count(i)) out.push_back(i);
  return out;
}

class MutateTileSize : public Mutator {
 public:
  std::string name() const override { return "mutate_tile_size"; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const override {
    std::vector<size_t> cands = instructions_of(sketch, "sample_perfect_tile");
    if (cands.empty()) return std::nullopt;
    for (int attempt = 0; attempt < 16; ++attempt) {
      size_t inst = cands[rng() % cands.size()];
      std::vector<int64_t> f = sketch.decisions.at(inst).get<std::vector<int64_t>>();
      const int64_t old_inner = f.back();
      if (f.size() < 2) continue;
      size_t from = rng() % f.size(), to = rng() % f.size();
      if (from == to || f[from] == 1) continue;
      std::vector<int64_t> divisors;
      for (int64_t d = 2; d <= f[from]; ++d)
        if (f[from] % d == 0) divisors.push_back(d);
      int64_t d = divisors[rng() % divisors.size()];
      f[from] /= d;
      f[to] *= d;
      int64_t cap = sketch.instructions[inst].attrs.value("max_innermost_factor", int64_t{0});
      if (cap > 0 && f.back() > cap) continue;
      // Keep whole vectors innermost once the tiling has them.
      int64_t multiple = sketch.instructions[inst].attrs.value("innermost_multiple", int64_t{0});
      if (multiple > 0 && old_inner % multiple == 0 && f.back() % multiple != 0) continue;
      return sketch.with_decision(inst, json(f));
    }
    return std::nullopt;
  }
};

// A sample_categorical whose result feeds an annotation with `key`.
class MutateCategorical : public Mutator {
 public:
  MutateCategorical(std::string name, std::string key) : name_(std::move(name)), key_(std::move(key)) {}
  std::string name() const override { return name_; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const override {
    std::vector<size_t> cands;
    for (size_t i : instructions_of(sketch, "sample_categorical")) {
      const std::string &out = sketch.instructions[i].outputs.at(0);
      for (const ir::Instruction &use : sketch.instructions) {
        if (use.kind == "annotate" && use.inputs.size() == 2 && use.inputs[1] == out &&
            use.attrs.value("key", std::string()) == key_)
          cands.push_back(i);
      }
    }
    if (cands.empty()) return std::nullopt;
    size_t inst = cands[rng() % cands.size()];
    size_t n = sketch.instructions[inst].attrs.at("candidates").size();
    if (n < 2) return std::nullopt;
    int64_t old = sketch.decisions.at(inst).get<int64_t>();
    int64_t next = static_cast<int64_t>(rng() % (n - 1));
    if (next >= old) ++next;
    return sketch.with_decision(inst, json(next));
  }

 private:
  std::string name_, key_;
};

class MutateComputeLocation : public Mutator {
 public:
  std::string name() const override { return "mutate_compute_location"; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const override {
    std::vector<size_t> cands = instructions_of(sketch, "sample_compute_location");
    if (cands.empty()) return std::nullopt;
    size_t inst = cands[rng() % cands.size()];
    int64_t old = sketch.decisions.at(inst).get<int64_t>();
    // Neighbouring locations; replay rejects one that does not exist.
    int64_t next = rng() % 2 ? old + 1 : old - 1;
    if (next < -1) next = old + 1;
    return sketch.with_decision(inst, json(next));
  }
};

}  // namespace

std::vector<WeightedMutator> default_mutators(const Target &) {
  std::vector<WeightedMutator> out;
  out.push_back({std::make_unique<MutateTileSize>(), 0.85});
  out.push_back({std::make_unique<MutateCategorical>("mutate_parallel", "kiln.parallel"), 0.05});
  out.push_back({std::make_unique<MutateCategorical>("mutate_unroll", "kiln.unroll"), 0.05});
  out.push_back({std::make_unique<MutateComputeLocation>(), 0.05});
  return out;
}

}  // namespace kiln::search
