// The program a task runs before it is tuned (a user's first compile, and every task a
// tuning budget did not reach). Blocks that MultiLevelTiling applies to (matrix
// products, convolutions) take its sketches with decisions chosen by rule instead of
// sampled: a register tile of k vectors along the vector axis by r rows of the last
// other spatial axis, as many accumulators as the register file holds besides the
// step's operands, the whole reduction between the tile loads and stores, the
// outer tiles parallel, the tile unrolled. This is the micro-kernel a BLAS writes by
// hand; untiled, a convolution reloads and stores its output vector once per
// multiply-add, and whole CNNs ran 2-6x slower than ONNX Runtime. Programs without
// such a block keep untuned_rules (element-wise ops inlined, parallel outside,
// vectorized inside).
#include <algorithm>
#include <numeric>

#include "ir/schedule/instruction_kind.h"
#include "search/block_info.h"
#include "search/space.h"

namespace kiln::search {
namespace {

using nlohmann::json;

bool is_tiling(const ir::Instruction &i) {
  return i.kind == &ir::instructions::kSamplePerfectTile || i.kind == &ir::instructions::kSampleTile;
}

// One sampled tiling of a trace as the heuristic sees it.
struct Tiling {
  size_t index = 0;       // in the trace
  bool padded = false;    // sample_tile: the outer factor follows the extent (-1)
  int64_t levels = 0;     // 4 for a spatial loop (S0 S1 S2 S3), 2 or 3 for a reduction
  int64_t room = 0;       // the extent, or for a padded tiling the least it can be
  int64_t max_inner = 0;  // the cap on the innermost factor (0: none)
  int64_t multiple = 0;   // innermost_multiple: the vector axis's whole vectors
};

Tiling describe(const ir::Trace &sampled, size_t index) {
  const ir::Instruction &inst = sampled.instructions[index];
  Tiling t;
  t.index = index;
  t.padded = inst.kind == &ir::instructions::kSampleTile;
  t.levels = inst.attrs.value("n", int64_t{0});
  t.max_inner = inst.attrs.value("max_innermost_factor", int64_t{0});
  t.multiple = inst.attrs.value("innermost_multiple", int64_t{0});
  std::vector<int64_t> drawn = sampled.decisions.at(index).get<std::vector<int64_t>>();
  int64_t inner = 1;
  for (size_t i = 1; i < drawn.size(); ++i) inner *= drawn[i];
  t.room = t.padded ? (drawn[0] - 1) * inner + 1 : drawn[0] * inner;
  return t;
}

// The largest factor of `extent` up to `cap` (any value up to `cap` for a padded tiling).
int64_t largest_fit(const Tiling &t, int64_t cap) {
  cap = std::max<int64_t>(1, std::min(cap, t.room));
  if (t.padded) return cap;
  for (int64_t d = cap; d > 1; --d)
    if (t.room % d == 0) return d;
  return 1;
}

// A decision with the given inner factors (innermost last) and the rest outermost.
json decision(const Tiling &t, const std::vector<int64_t> &inner) {
  std::vector<int64_t> f(static_cast<size_t>(t.levels), 1);
  int64_t product = 1;
  for (size_t i = 0; i < inner.size() && i + 1 < f.size(); ++i) {
    f[f.size() - inner.size() + i] = inner[i];
    product *= inner[i];
  }
  f[0] = t.padded ? -1 : t.room / product;
  return json(f);
}

// Chooses the decisions of one block's tilings (consecutive in the trace, loop order).
void decide_block(const std::vector<Tiling> &group, int64_t lanes, int64_t registers, ir::Trace &out) {
  const Tiling *vector = nullptr, *rows = nullptr;
  for (const Tiling &t : group) {
    if (t.levels != 4) continue;
    if (t.multiple > 0 && !vector)
      vector = &t;
    else
      rows = &t;  // the last other spatial loop: the register tile's rows
  }
  // Reductions run whole between the tile's loads and stores.
  for (const Tiling &t : group)
    if (t.levels != 4) out.decisions[t.index] = decision(t, {1});
  // k accumulators per row, the k weight vectors of the step and one broadcast stay in
  // registers: k x (r + 1) + 1 of them. One more spills an accumulator every step, which
  // then waits on a store and a load besides its multiply-add (half the speed, measured).
  // k is a power of two: LLVM scalarizes a 3-vector accumulator tile.
  // Among the tiles with enough accumulators to hide the multiply-add latency (10: two
  // pipes of 5 cycles; or the most there can be), the one with the most multiply-adds
  // per load (k x r per k + r): 6 rows of 2 vectors on AVX2 rather than 14 rows of 1,
  // which loads a broadcast for every multiply-add (1x1 convolutions of 58 channels
  // ran at 18 GFLOP/s on one Zen 2 core with 14 x 1).
  struct Choice {
    int64_t k = 1, r = 1;
  };
  std::vector<Choice> choices;
  if (vector) {
    for (int64_t k = 1; k * lanes <= (vector->max_inner > 0 ? vector->max_inner : 4 * lanes) && k <= 4; k *= 2) {
      if (k * lanes > vector->room || (!vector->padded && vector->room % (k * lanes) != 0)) continue;
      choices.push_back({k, rows ? largest_fit(*rows, (registers - 1) / k - 1) : 1});
    }
  }
  int64_t most = 0;
  for (const Choice &c : choices) most = std::max(most, c.k * c.r);
  const int64_t enough = std::min<int64_t>(10, most);
  const Choice *chosen = nullptr;
  for (const Choice &c : choices) {
    if (c.k * c.r < enough) continue;
    // k r / (k + r) compared without division.
    if (!chosen || c.k * c.r * (chosen->k + chosen->r) > chosen->k * chosen->r * (c.k + c.r)) chosen = &c;
  }
  for (const Tiling &t : group) {
    if (t.levels != 4) continue;
    if (&t == vector)
      out.decisions[t.index] =
          chosen ? decision(t, {1, 1, chosen->k * lanes}) : decision(t, {1, 1, largest_fit(t, lanes)});
    else if (&t == rows)
      out.decisions[t.index] = decision(t, {1, chosen ? chosen->r : 1, 1});
    else
      out.decisions[t.index] = decision(t, {1, 1, 1});
  }
}

// The sketch with heuristic decisions, or nullopt when it has no tiling.
std::optional<ir::Trace> decide(const ir::PrimFunc &func, const ir::Trace &sketch, const Target &target) {
  std::optional<ir::Schedule> drawn = ir::Schedule::try_replay(func, sketch, 0);
  if (!drawn) return std::nullopt;
  const ir::Trace &sampled = drawn->trace();
  ir::Trace out = sketch;
  out.decisions = sampled.decisions;
  const int64_t lanes = vector_lanes(target), registers = vector_registers(target);
  bool tiled = false;
  std::vector<Tiling> group;
  auto close_group = [&] {
    if (!group.empty()) decide_block(group, lanes, registers, out);
    group.clear();
  };
  for (size_t i = 0; i < sampled.instructions.size(); ++i) {
    const ir::Instruction &inst = sampled.instructions[i];
    if (is_tiling(inst) && sampled.decisions.count(i)) {
      group.push_back(describe(sampled, i));
      tiled = true;
    } else if (inst.kind == &ir::instructions::kSampleCategorical) {
      close_group();
      // Parallel extents are multiples of the cores and unroll depths 0..512: the third
      // candidate of each (16 x cores, 64) suits a register tile's loops.
      std::vector<int64_t> candidates = inst.attrs.at("candidates").get<std::vector<int64_t>>();
      if (candidates.size() >= 3) out.decisions[i] = json(2);
    } else if (inst.kind != &ir::instructions::kSplit) {
      close_group();
    }
  }
  close_group();
  if (!tiled) return std::nullopt;
  return out;
}

// For a GPU: each block's spatial loops fused and spread over blocks of threads, its
// reduction loops serial in each thread, every stage its own kernel. Correct and
// simple (the reference a GPU candidate is checked against, and a task's first
// program), not fast: the GPU search space is what makes programs fast.
std::optional<ir::Trace> gpu_untuned_trace(const ir::PrimFunc &func, const Target &target) {
  ir::Schedule sch(func);
  const int64_t most_threads = std::min<int64_t>(256, target.max_threads_per_block);
  for (const std::string &name : sch.block_names()) {
    int64_t threads = std::min(most_threads, spatial_size(find_block(sch, name).get()));
    if (!bind_spatial_loops(sch, name, std::max<int64_t>(threads, 1))) return std::nullopt;
  }
  return sch.trace();
}

}  // namespace

std::optional<Candidate> untuned_candidate(const ir::PrimFunc &func, const Target &target) {
  if (target.backend().is_gpu()) return std::nullopt;
  PostprocessorList post = default_postprocessors(target);
  for (const ir::Trace &sketch : generate_sketches(func, default_rules(target), 0)) {
    std::optional<ir::Trace> decided = decide(func, sketch, target);
    if (!decided) continue;
    if (std::optional<Candidate> c = realize(func, *decided, post, 0)) return c;
  }
  return std::nullopt;
}

std::optional<ir::Trace> untuned_trace(const ir::PrimFunc &func, const Target &target) {
  if (target.backend().is_gpu()) return gpu_untuned_trace(func, target);
  if (std::optional<Candidate> c = untuned_candidate(func, target)) return c->trace;
  PostprocessorList post = default_postprocessors(target);
  for (const ir::Trace &sketch : generate_sketches(func, untuned_rules(target), 0))
    if (std::optional<Candidate> c = realize(func, sketch, post, 0)) return c->trace;
  return std::nullopt;
}

ir::PrimFunc untuned_schedule(const ir::PrimFunc &func, const Target &target) {
  std::optional<ir::Trace> trace = untuned_trace(func, target);
  return trace ? ir::Schedule::replay(func, *trace).func() : func;
}

}  // namespace kiln::search
