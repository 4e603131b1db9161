// GpuMultiLevelTiling (cuda targets): a block with a reduction that reads an input again
// (a matrix product, a convolution) tiled for a thread block and its threads, "SSRRS" in Ansor's terms
// folded to one blockIdx and one threadIdx loop:
//
//   S0  the thread block's tile   every spatial loop's outer part, fused: blockIdx.x
//   S1  the threads               their middle parts, fused: threadIdx.x
//   R0  reduction slices          a slice of each input is staged in shared memory here
//   R1  within a slice            unrolled
//   S2  a thread's own outputs    unrolled, accumulated in registers ("local")
//
// Every split is a sampled tile (mutate_tile_size changes them), perfect but on spatial
// axes without a small factor, whose last tile may be partial; the inputs'
// shared copies are filled by all threads of the block together, with a sampled
// vector length (rewrite_cooperative_fetch lays them out once the thread count is
// known). Element-wise consumers (a bias, GELU) are fused into the write-back of the
// accumulators. The rule also keeps the block as it was, for auto_bind (the floor of
// the GPU space), so a shape that no tiling fits still has programs.
#include <algorithm>
#include <optional>

#include "ir/annotations.h"
#include "ir/functor.h"
#include "ir/schedule/analysis.h"
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

using ir::BlockRV;
using ir::LoopRV;
using ir::Schedule;

class GpuMultiLevelTiling : public ScheduleRule {
 public:
  std::string name() const override { return "gpu_multi_level_tiling"; }

  std::vector<Schedule> apply(Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || !has_reduction(b.get()) || spatial_size(b.get()) < kMinSpatial || !reads_an_input_again(b.get()))
      return only(std::move(sch));
    std::vector<LoopKind> kinds = loop_kinds(sch, block);
    if (std::count(kinds.begin(), kinds.end(), LoopKind::kMixed)) return only(std::move(sch));
    std::vector<Schedule> out;
    if (std::optional<Schedule> tiled = tile(sch, block, kinds)) out.push_back(std::move(*tiled));
    out.push_back(std::move(sch));
    return out;
  }

 private:
  // Fewer outputs than a warp's worth of threads per block: nothing to tile.
  static constexpr int64_t kMinSpatial = 64;
  // A thread's own outputs along one axis, and a reduction slice's length.
  static constexpr int64_t kMaxThreadTile = 8;
  static constexpr int64_t kMaxSlice = 16;

  // A spatial extent without a small factor (61 rows, 197 tokens, 1001 classes) has
  // only tiles of 1 or of itself that divide it: a thread per output, or one block.
  // Such axes take tiles that need not divide them (the last block's tile is partial,
  // its threads past the end guarded), as the CPU rule's padded tiles do. Reductions
  // keep perfect tiles: a slice staged in shared memory is never partial.
  static bool needs_partial_tiles(int64_t extent) {
    constexpr int64_t kSmallFactor = 8;
    if (extent <= 2 * kSmallFactor) return false;
    for (int64_t d = 2; d <= kSmallFactor; ++d)
      if (extent % d == 0) return false;
    return true;
  }

  static std::optional<Schedule> tile(const Schedule &original, const std::string &block,
                                      const std::vector<LoopKind> &kinds) {
    Schedule sch = original;
    BlockRV c = sch.get_block(block);
    std::vector<LoopRV> loops = sch.get_loops(c);
    for (const LoopRV &loop : loops)
      if (sch.loop(loop)->for_kind != ir::ForKind::kSerial) return std::nullopt;  // scheduled already
    std::optional<BlockRV> write_back = sch.try_cache_write(c, 0, "local");
    if (!write_back) return std::nullopt;
    loops = sch.get_loops(c);
    std::vector<LoopRV> s0, s1, s2, r0, r1, trivial;
    for (size_t i = 0; i < loops.size(); ++i) {
      // A loop of extent 1 drives nothing; innermost, it stays out of the fused loops.
      if (sch.loop(loops[i])->extent == 1) {
        trivial.push_back(loops[i]);
        continue;
      }
      if (kinds[i] == LoopKind::kSpatial) {
        const int64_t extent = sch.loop(loops[i])->extent;
        std::optional<std::vector<ir::ExprRV>> f = needs_partial_tiles(extent)
                                                       ? sch.try_sample_tile(loops[i], 3, kMaxThreadTile)
                                                       : sch.try_sample_perfect_tile(loops[i], 3, kMaxThreadTile);
        if (!f) return std::nullopt;
        std::vector<LoopRV> parts = sch.split(loops[i], std::vector<ir::Factor>(f->begin(), f->end()));
        s0.push_back(parts[0]);
        s1.push_back(parts[1]);
        s2.push_back(parts[2]);
      } else {
        std::optional<std::vector<ir::ExprRV>> f = sch.try_sample_perfect_tile(loops[i], 2, kMaxSlice);
        if (!f) return std::nullopt;
        std::vector<LoopRV> parts = sch.split(loops[i], std::vector<ir::Factor>(f->begin(), f->end()));
        r0.push_back(parts[0]);
        r1.push_back(parts[1]);
      }
    }
    if (s0.empty() || r0.empty()) return std::nullopt;
    std::vector<LoopRV> order;
    for (const auto *level : {&s0, &s1, &r0, &r1, &s2, &trivial})
      order.insert(order.end(), level->begin(), level->end());
    sch.reorder(order);
    LoopRV blocks = fuse_loops(sch, s0);
    LoopRV threads = fuse_loops(sch, s1);
    sch.bind(blocks, "blockIdx.x");
    sch.bind(threads, "threadIdx.x");
    if (!sch.try_reverse_compute_at(*write_back, threads)) return std::nullopt;
    // The epilogue (bias, activation) is computed as the accumulators are written back.
    std::string write_back_name = sch.block_name(*write_back);
    for (const std::string &consumer : consumers_of(sch, write_back_name)) {
      ir::NodeRef<ir::BlockNode> e = find_block(sch, consumer);
      if (e && is_elementwise(e.get())) sch.try_reverse_compute_inline(sch.get_block(consumer));
    }
    // Each input's slice for the current R0 step, copied into shared memory by the
    // block's threads together. Reads are numbered as the block lists them; the
    // accumulator's own read (the update) is not an input.
    ir::NodeRef<ir::BlockNode> tiled = find_block(sch, block);
    std::vector<int> inputs;
    std::vector<ir::sched::Access> reads = ir::sched::block_reads(tiled.get());
    for (size_t r = 0; r < reads.size(); ++r)
      if (!ir::sched::writes_buffer(tiled.get(), reads[r].buffer.get()) && !reads[r].indices.empty())
        inputs.push_back(static_cast<int>(r));
    const int64_t fetch_level = 2 + static_cast<int64_t>(r0.size());
    for (int r : inputs) {
      std::optional<BlockRV> copy = sch.try_cache_read(c, r, "shared");
      if (!copy) return std::nullopt;
      if (!sch.try_compute_at(*copy, r0.back())) return std::nullopt;
      ir::ExprRV vector = sch.sample_categorical({1, 2, 4}, {1.0 / 3, 1.0 / 3, 1.0 / 3});
      sch.annotate(*copy, ir::annotation::kCooperativeFetch, vector);
      sch.annotate(*copy, ir::annotation::kFetchLevel, fetch_level);
    }
    for (const LoopRV &loop : r1) sch.unroll(loop);
    for (const LoopRV &loop : s2) sch.unroll(loop);
    return sch;
  }
};

}  // namespace

std::shared_ptr<const ScheduleRule> gpu_multi_level_tiling_rule() { return std::make_shared<GpuMultiLevelTiling>(); }

}  // namespace kiln::search
