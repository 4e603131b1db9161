#include "search/transfer.h"

#include <algorithm>

#include "ir/schedule/instruction_kind.h"
#include "ir/schedule/schedule.h"
#include "search/space.h"

namespace kiln::search {
namespace {

// The sampling instructions of a trace, in order.
std::vector<size_t> sampling_instructions(const ir::Trace &t) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.instructions.size(); ++i)
    if (t.instructions[i].kind->samples) out.push_back(i);
  return out;
}

bool same_sampling(const ir::Instruction &a, const ir::Instruction &b) {
  return a.kind == b.kind && a.attrs == b.attrs;
}

bool is_perfect_tiling(const ir::Instruction &i) { return i.kind == &ir::instructions::kSamplePerfectTile; }
bool is_padded_tiling(const ir::Instruction &i) { return i.kind == &ir::instructions::kSampleTile; }
bool is_tiling(const ir::Instruction &i) { return is_perfect_tiling(i) || is_padded_tiling(i); }

int64_t product(const std::vector<int64_t> &f, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < f.size(); ++i) p *= f[i];
  return p;
}

}  // namespace

std::optional<ir::Trace> carry_decisions(const ir::Trace &sketch, const ir::Trace &foreign) {
  std::vector<size_t> mine = sampling_instructions(sketch), theirs = sampling_instructions(foreign);
  if (mine.empty() || theirs.empty()) return std::nullopt;
  auto same = [&](size_t i, size_t j) {
    return same_sampling(sketch.instructions[mine[i]], foreign.instructions[theirs[j]]);
  };
  // lcs[i][j]: the longest common subsequence of mine[i..] and theirs[j..].
  std::vector<std::vector<int>> lcs(mine.size() + 1, std::vector<int>(theirs.size() + 1, 0));
  for (size_t i = mine.size(); i-- > 0;)
    for (size_t j = theirs.size(); j-- > 0;)
      lcs[i][j] = same(i, j) ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  ir::Trace out = sketch;
  out.decisions.clear();
  std::vector<bool> mine_matched(mine.size()), theirs_matched(theirs.size());
  for (size_t i = 0, j = 0; i < mine.size() && j < theirs.size();) {
    if (same(i, j) && lcs[i][j] == lcs[i + 1][j + 1] + 1) {
      if (auto d = foreign.decisions.find(theirs[j]); d != foreign.decisions.end()) {
        nlohmann::json decision = d->second;
        // "-1": the outermost factor of a padded tiling follows this task's extent.
        if (is_padded_tiling(sketch.instructions[mine[i]]) && decision.is_array() && !decision.empty())
          decision[0] = -1;
        out.decisions[mine[i]] = std::move(decision);
      }
      mine_matched[i++] = theirs_matched[j++] = true;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
      ++i;
    } else {
      ++j;
    }
  }
  int tilings = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    if (!is_tiling(sketch.instructions[mine[i]])) continue;
    if (!mine_matched[i]) return std::nullopt;
    ++tilings;
  }
  if (tilings == 0) return std::nullopt;  // what is worth carrying over is a tiling
  for (size_t j = 0; j < theirs.size(); ++j)
    if (!theirs_matched[j] && is_tiling(foreign.instructions[theirs[j]])) return std::nullopt;
  return out;
}

std::vector<int64_t> fit_perfect_tiling(const std::vector<int64_t> &want, int64_t extent,
                                        int64_t max_innermost_factor) {
  std::vector<int64_t> out(want.size(), 1);
  if (want.empty()) return out;
  int64_t rest = extent;
  for (size_t i = want.size(); i-- > 1;) {
    int64_t cap = std::max<int64_t>(want[i], 1);
    if (i + 1 == want.size() && max_innermost_factor > 0) cap = std::min(cap, max_innermost_factor);
    int64_t d = std::min(cap, rest);
    while (rest % d != 0) --d;
    out[i] = d;
    rest /= d;
  }
  out[0] = rest;
  return out;
}

std::optional<ir::Trace> fit_tilings(const ir::PrimFunc &func, const ir::Trace &carried, uint64_t seed) {
  std::optional<ir::Schedule> fresh = ir::Schedule::try_replay(func, strip_decisions(carried), seed);
  if (!fresh) return std::nullopt;
  // Replaying records one instruction per instruction of the sketch: indices agree.
  const ir::Trace &sampled = fresh->trace();
  ir::Trace out = carried;
  for (auto &[index, decision] : out.decisions) {
    const ir::Instruction &inst = carried.instructions[index];
    auto drawn = sampled.decisions.find(index);
    if (!is_tiling(inst) || drawn == sampled.decisions.end() || !decision.is_array()) continue;
    auto want = decision.get<std::vector<int64_t>>();
    auto got = drawn->second.get<std::vector<int64_t>>();
    if (want.size() != got.size() || want.empty()) return std::nullopt;
    int64_t max_inner = inst.attrs.value("max_innermost_factor", int64_t{0});
    if (is_perfect_tiling(inst)) {
      decision = fit_perfect_tiling(want, product(got), max_inner);
      continue;
    }
    // A padded tiling's draw pads less than one inner tile: (outer - 1) x inner + 1 is
    // the least the extent can be, and inner factors within it always fit.
    int64_t room = (got[0] - 1) * product(got, 1) + 1, used = 1;
    for (size_t i = want.size(); i-- > 1;) {
      int64_t cap = std::max<int64_t>(want[i], 1);
      if (i + 1 == want.size() && max_inner > 0) cap = std::min(cap, max_inner);
      want[i] = std::max<int64_t>(1, std::min(cap, room / used));
      used *= want[i];
    }
    want[0] = -1;
    decision = want;
  }
  return out;
}

}  // namespace kiln::search
