// Carrying a program of one task over to another: the decisions of a sketch of task A
// applied to a sketch of task B that samples the same way. Models are full of such
// pairs: the same convolution with and without a residual add (one epilogue more), or
// the same layer type at another stage of the network (other extents). The scheduler
// offers each task's new best to the others (EvolutionarySearch::adopt).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/schedule/trace.h"
#include "ir/stmt.h"

namespace kiln::search {

/// `sketch` (one of this task's, without decisions) with the decisions of `foreign`
/// (another task's sketch with decisions), matched along the longest common subsequence
/// of their sampling instructions (same kind and attributes): the samplings only one of
/// them has (an epilogue's own annotations) stay undecided. nullopt unless every tiling
/// of either is matched and there is one. A padded tiling's outermost factor is left to follow the extent.
std::optional<ir::Trace> carry_decisions(const ir::Trace &sketch, const ir::Trace &foreign);

/// `carried` with every tiling decision fitted to this task's loops, for a foreign
/// program of another shape: inner factors are kept where they divide the loop (perfect
/// tilings) or fit in it (padded tilings), else shrunk to the largest that does, and
/// the outermost takes the rest. The extents come from replaying the sketch on `func`
/// with fresh decisions (`seed`); nullopt when that fails.
std::optional<ir::Trace> fit_tilings(const ir::PrimFunc &func, const ir::Trace &carried, uint64_t seed);

/// A perfect tiling of `extent` in want.size() levels close to `want`: from the
/// innermost level out, the largest divisor of what is left that is at most the wanted
/// factor (and at most `max_innermost_factor` innermost, when > 0); the outermost level
/// takes the rest.
std::vector<int64_t> fit_perfect_tiling(const std::vector<int64_t> &want, int64_t extent, int64_t max_innermost_factor);

}  // namespace kiln::search
