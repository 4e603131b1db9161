// Memory planning for compiled models: every activation (graph inputs, intermediates,
// outputs) gets an offset in one arena, and two values share bytes only when their
// lifetimes do not overlap. The plan is made once at compile time and stored in the
// model's manifest, so loading allocates one block and an inference allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::executor {

/// A value's size and the steps during which it must hold its bytes: written by step
/// `first` (or before any step: -1 for graph inputs) and last read by step `last`
/// (graph outputs: the number of steps). Both ends are inclusive, so a step's output
/// never shares bytes with that step's inputs.
struct BufferLifetime {
  int64_t bytes = 0;
  int first = 0;
  int last = 0;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  ///< per lifetime, in the arena; multiples of kArenaAlignment
  int64_t arena_bytes = 0;       ///< the arena's size
  int64_t unplanned_bytes = 0;   ///< what one buffer per value would take (aligned)
};

inline constexpr int64_t kArenaAlignment = 64;

/// Greedy by size (largest first, each at the lowest offset free during its lifetime),
/// as TensorFlow Lite's arena planner does; within a few percent of the optimum on
/// the chains and residual blocks of real models.
MemoryPlan plan_memory(const std::vector<BufferLifetime> &lifetimes);

}  // namespace kiln::executor
