// Mutators: each changes one decision of a sketch trace.
//   MutateTileSize         moves a factor between two levels of a sampled perfect
//                          tiling, or redraws one inner factor of a sampled tiling that
//                          need not divide its extent (the outermost is then inferred)
//   MutateCategorical      another candidate of a sampled annotation value (the
//                          parallel extent, the unroll depth: one instance per key)
//   MutateComputeLocation  a neighbouring sampled compute location
#include <algorithm>
#include <functional>

#include "search/components.h"

namespace kiln::search {
namespace {

using nlohmann::json;

class MutateTileSize : public Mutator {
 public:
  std::string name() const override { return "mutate_tile_size"; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const override {
    std::vector<size_t> cands = sketch.decided(ir::instructions::kSamplePerfectTile);
    for (size_t i : sketch.decided(ir::instructions::kSampleTile)) cands.push_back(i);
    if (cands.empty()) return std::nullopt;
    for (int attempt = 0; attempt < 16; ++attempt) {
      size_t inst = cands[rng() % cands.size()];
      std::vector<int64_t> f = sketch.decisions.at(inst).get<std::vector<int64_t>>();
      if (sketch.instructions[inst].kind == &ir::instructions::kSampleTile) {
        if (std::optional<std::vector<int64_t>> g = redraw_inner_factor(sketch.instructions[inst], f, rng))
          return sketch.with_decision(inst, json(*g));
        continue;
      }
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

 private:
  // Replay infers the outermost factor and rejects inner factors that outgrow the loop.
  static std::optional<std::vector<int64_t>> redraw_inner_factor(const ir::Instruction &inst, std::vector<int64_t> f,
                                                                 Rng &rng) {
    if (f.size() < 2) return std::nullopt;
    size_t level = 1 + rng() % (f.size() - 1);
    std::vector<int64_t> choices =
        ir::tile_factor_choices(level + 1 == f.size(), inst.attrs.value("max_innermost_factor", int64_t{0}),
                                inst.attrs.value("innermost_multiple", int64_t{0}));
    choices.erase(std::remove(choices.begin(), choices.end(), f[level]), choices.end());
    if (choices.empty()) return std::nullopt;
    f[level] = choices[rng() % choices.size()];
    f[0] = -1;
    return f;
  }
};

// Another candidate of a sample_categorical whose result `feeds` a later instruction
// (an annotation with a given key, a split).
class MutateCategorical : public Mutator {
 public:
  using Feeds = std::function<bool(const ir::Instruction &use, const std::string &sampled)>;
  MutateCategorical(std::string name, Feeds feeds) : name_(std::move(name)), feeds_(std::move(feeds)) {}
  std::string name() const override { return name_; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const override {
    std::vector<size_t> cands;
    for (size_t i : sketch.decided(ir::instructions::kSampleCategorical)) {
      const std::string &out = sketch.instructions[i].outputs.at(0).name;
      for (const ir::Instruction &use : sketch.instructions)
        if (feeds_(use, out)) cands.push_back(i);
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
  std::string name_;
  Feeds feeds_;
};

class MutateComputeLocation : public Mutator {
 public:
  std::string name() const override { return "mutate_compute_location"; }
  std::optional<ir::Trace> apply(const ir::Trace &sketch, Rng &rng) const override {
    std::vector<size_t> cands = sketch.decided(ir::instructions::kSampleComputeLocation);
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

std::shared_ptr<const Mutator> mutate_tile_size() { return std::make_shared<MutateTileSize>(); }
std::shared_ptr<const Mutator> mutate_annotation_choice(std::string name, std::string annotation_key) {
  return std::make_shared<MutateCategorical>(
      std::move(name), [key = std::move(annotation_key)](const ir::Instruction &use, const std::string &sampled) {
        return use.kind == &ir::instructions::kAnnotate && use.inputs.size() == 2 && use.inputs[1] == sampled &&
               use.attrs.value("key", std::string()) == key;
      });
}
std::shared_ptr<const Mutator> mutate_compute_location() { return std::make_shared<MutateComputeLocation>(); }
std::shared_ptr<const Mutator> mutate_thread_extent() {
  return std::make_shared<MutateCategorical>(
      "mutate_thread_extent", [](const ir::Instruction &use, const std::string &sampled) {
        return use.kind == &ir::instructions::kSplit &&
               std::find(use.inputs.begin() + 1, use.inputs.end(), json(sampled)) != use.inputs.end();
      });
}

}  // namespace kiln::search
