// MultiLevelTiling: blocks with a reduction are tiled "SSRSRS" (S0 S1 R0 S2 R1 S3), in
// up to seven variants that the rule fans out to:
//
//   variant                 levels    S2 x S3 accumulator   packed input
//   accumulator + packing   SSRSRS    yes                   the streamed input, per S0 tile
//   accumulator             SSRSRS    yes                   -
//   plain                   SSRSRS    no (the output)       -
//   blocked reduction       S Rb SRSRS  no (LLVM promotes)  the streamed input, per Rb block
//   other vector axis       SSRSRS    yes                   the weights, along the vector axis
//   panel packed once       SSRSRS    yes                   the streamed input, at the vector
//                                                           axis's S0 tile, placed first
//   other vector axis,      SSRSRS    yes                   the weights, along the vector axis,
//     rows outer                                            the output's rows outermost
//
// A matrix-vector product also gets a sketch that vectorizes along the reduction
// (tile_reduction_vectors: rfactor by the lanes, then the accumulator variant).
//
// Each variant runs the same steps over one TilingState: split the loops into levels
// (the innermost spatial tile becomes the vector loop; extents without good factors get
// tiles that need not divide them, see needs_padded_tiles), annotate the register tile for
// RejectPoorRegisterTiles, then either fuse the epilogue per S1 tile (no accumulator) or
// write back through an accumulator with the epilogue fused into the write-back, and
// pack inputs. A variant that does not apply to a block (no tiling under the innermost
// cap, a reduction too short to block, no other axis to vectorize) yields nothing.
#include <algorithm>
#include <optional>

#include "ir/annotations.h"
#include "ir/functor.h"
#include "search/block_info.h"
#include "search/components.h"
#include "support/internal_check.h"

namespace kiln::search {
namespace {

using ir::BlockRV;
using ir::LoopRV;
using ir::Schedule;

enum class Packing {
  kNone,
  /// The streamed input (B of a GEMM, a dense layer's weights) once per S0 tile; the
  /// variant does not apply without one.
  kAtOuterTile,
  /// The streamed input once per reduction block, where there is one.
  kAtReductionBlockIfAny,
  /// The input indexed by the vector axis, once per outer tile of that axis.
  kAlongVectorAxis,
  /// The streamed input when no other spatial iterator indexes it (a dense layer's
  /// W[n, k]): the vector axis's outer tile goes first among the S0 loops and the
  /// panel is packed there, once per call, for every row tile (BLAS's order: pack a
  /// panel of B, then run all of A's row blocks over it).
  kOncePerPanel,
};

struct TilingVariant {
  /// S2 x S3 accumulates in a local buffer written back after the reduction.
  bool accumulator;
  /// An outermost reduction level Rb after S0 (S0 Rb S1 R0 S2 R1 S3): the output
  /// accumulates across its blocks, and a packed panel holds one block, so it stays in
  /// cache for a long reduction.
  bool blocked_reduction;
  /// Vectorize over another spatial axis when the innermost output axis makes poor
  /// vectors (see other_vector_axis).
  bool other_vector_axis;
  Packing packing;
  /// The vector axis's S0 loop goes after the other S0 loops (an image's rows) instead
  /// of first, and the panel is packed there. Only where the panel's input is a
  /// constant of the program: packed ahead of time (ir/layout_rewrite.h), the panel
  /// costs nothing per row tile, and the rows can then be fused into the parallel loop.
  /// Each core then computes every output channel of its own rows and pads and reads
  /// only those rows (plus the window's halo), where a channel split makes every core
  /// pad and read the whole input: on a 64x56x56 layer 1.7 MB per core, against 2 MB of
  /// L2, besides the output and the weights.
  bool rows_outer = false;
};

// In the order the rule fans out to them (the order of the sketches).
constexpr TilingVariant kVariants[] = {
    {.accumulator = true, .blocked_reduction = false, .other_vector_axis = false, .packing = Packing::kAtOuterTile},
    {.accumulator = true, .blocked_reduction = false, .other_vector_axis = false, .packing = Packing::kNone},
    {.accumulator = false, .blocked_reduction = false, .other_vector_axis = false, .packing = Packing::kNone},
    {.accumulator = false,
     .blocked_reduction = true,
     .other_vector_axis = false,
     .packing = Packing::kAtReductionBlockIfAny},
    {.accumulator = true, .blocked_reduction = false, .other_vector_axis = true, .packing = Packing::kAlongVectorAxis},
    {.accumulator = true, .blocked_reduction = false, .other_vector_axis = false, .packing = Packing::kOncePerPanel},
    {.accumulator = true,
     .blocked_reduction = false,
     .other_vector_axis = true,
     .packing = Packing::kAlongVectorAxis,
     .rows_outer = true},
};
constexpr const TilingVariant &kAccumulatorVariant = kVariants[1];

// Tiling levels, outermost first.
enum Level : size_t { kS0, kRb, kS1, kR0, kS2, kR1, kS3, kNumLevels };

struct VectorAxis {
  size_t loop = 0;                        // among the block's loops before tiling
  ir::Var iter;                           // the spatial iterator it drives
  size_t output_dim = 0;                  // the dimension of the output that iterator indexes
  const ir::BufferNode *input = nullptr;  // the one input it indexes (the weights)
};

// What the steps of one variant share.
struct TilingState {
  TilingState(Schedule s, std::string b, std::vector<LoopKind> k)
      : sch(std::move(s)), block(std::move(b)), kinds(std::move(k)) {}

  Schedule sch;
  std::string block;
  BlockRV block_rv;
  std::vector<LoopKind> kinds;
  std::vector<LoopRV> loops;  // the block's loops before tiling
  std::vector<std::vector<LoopRV>> levels = std::vector<std::vector<LoopRV>>(kNumLevels);
  std::optional<VectorAxis> vector_axis;
  LoopRV vector_outer;  // the vector axis's S0 loop
  BlockRV accumulator;  // the write-back block, once there is one

  bool accumulates(const TilingVariant &v) const { return v.accumulator && !levels[kS1].empty(); }
};

class MultiLevelTiling : public ScheduleRule {
 public:
  explicit MultiLevelTiling(const Target &target)
      : max_innermost_(target.vector_width_bits >= 512 ? 64 : 32), lanes_(vector_lanes(target)) {}
  std::string name() const override { return "multi_level_tiling"; }

  std::vector<Schedule> apply(Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || !has_reduction(b.get()) || spatial_size(b.get()) < 4) return only(std::move(sch));
    std::vector<LoopKind> kinds = loop_kinds(sch, block);
    if (std::count(kinds.begin(), kinds.end(), LoopKind::kMixed)) return only(std::move(sch));
    std::vector<Schedule> out;
    for (const TilingVariant &variant : kVariants)
      if (std::optional<Schedule> s = tile(sch, block, kinds, variant)) out.push_back(std::move(*s));
    if (std::optional<Schedule> s = tile_reduction_vectors(sch, block, kinds)) out.push_back(std::move(*s));
    if (out.empty()) return only(std::move(sch));
    return out;
  }

 private:
  // A matrix-vector product (a classifier head: one row times W[n, k]) reads its
  // weights along k, contiguously, and along the output axis n with a stride of K:
  // vectors over n gather, and packing the weights costs as much as the product
  // itself when there are too few rows to reuse the panel. Vectors then run along the
  // reduction: its innermost loop is split by the lanes and factored out (rfactor)
  // into per-lane partial sums, which the accumulator variant tiles with the lanes
  // innermost (rows of n x one vector of k in registers); a short final reduction adds
  // the lanes.
  std::optional<Schedule> tile_reduction_vectors(const Schedule &sch, const std::string &block,
                                                 const std::vector<LoopKind> &kinds) const {
    if (kinds.empty() || kinds.back() != LoopKind::kReduce) return std::nullopt;
    Schedule s = sch;
    BlockRV b_rv = s.get_block(block);
    std::vector<LoopRV> loops = s.get_loops(b_rv);
    ir::NodeRef<ir::BlockNode> b = find_block(s, block);
    const ir::Var &k_loop = s.loop(loops.back())->loop_var;
    int64_t k_extent = s.loop(loops.back())->extent;
    if (k_extent % lanes_ != 0 || k_extent < 2 * lanes_) return std::nullopt;
    // Rows besides the output's innermost axis: too few to amortize a packed panel.
    int64_t rows = 1;
    size_t last_spatial = loops.size();
    for (size_t i = 0; i < loops.size(); ++i)
      if (kinds[i] == LoopKind::kSpatial && s.loop(loops[i])->extent > 1) last_spatial = i;
    if (last_spatial == loops.size()) return std::nullopt;
    for (size_t i = 0; i < last_spatial; ++i)
      if (kinds[i] == LoopKind::kSpatial) rows *= s.loop(loops[i])->extent;
    if (rows >= lanes_) return std::nullopt;
    // Some input is read contiguously along the reduction and with a stride along n.
    const ir::Var &n_loop = s.loop(loops[last_spatial])->loop_var;
    ir::VarMap bindings;
    for (size_t k = 0; k < b->iter_vars.size(); ++k) bindings[b->iter_vars[k].var.get()] = b->iter_values[k];
    bool streamed_along_k = false;
    for (const ir::sched::Access &a : ir::sched::block_reads(b.get())) {
      if (a.indices.empty() || ir::sched::writes_buffer(b.get(), a.buffer.get())) continue;
      ir::Expr last = ir::substitute(a.indices.back(), bindings);
      bool n_strided = false;
      for (size_t d = 0; d + 1 < a.indices.size(); ++d)
        n_strided = n_strided || ir::uses_var(ir::substitute(a.indices[d], bindings), n_loop.get());
      streamed_along_k = streamed_along_k || (unit_step(last, k_loop) && n_strided);
    }
    if (!streamed_along_k) return std::nullopt;
    std::vector<LoopRV> k_parts = s.split(loops.back(), {ir::Factor(int64_t{-1}), ir::Factor(lanes_)});
    // The partials get the lane as their last dimension; no rfactor: not a plain accumulation.
    std::optional<ir::BlockRV> rf = s.try_rfactor(k_parts[1], static_cast<int>(output_rank(b.get())));
    if (!rf) return std::nullopt;
    std::string rf_name = s.block_name(*rf);
    return tile(s, rf_name, loop_kinds(s, rf_name), kAccumulatorVariant);
  }

  static size_t output_rank(const ir::BlockNode *b) {
    std::vector<ir::sched::Access> writes = ir::sched::block_writes(b);
    return writes.empty() ? 0 : writes.front().indices.size();
  }

  std::optional<Schedule> tile(const Schedule &sch, const std::string &block, const std::vector<LoopKind> &kinds,
                               const TilingVariant &variant) const {
    TilingState st(sch, block, kinds);
    st.block_rv = st.sch.get_block(block);
    st.loops = st.sch.get_loops(st.block_rv);
    if (variant.packing == Packing::kOncePerPanel && !panel_shared_by_rows(st)) return std::nullopt;
    if (!split_into_levels(st, variant)) return std::nullopt;
    annotate_register_tile(st, variant);
    if (variant.blocked_reduction) {
      // Nothing to pack (a convolution's window reads): the blocking alone remains.
      pack_streamed_input(st.sch, block, st.levels[kRb].back());
      return st.sch;
    }
    if (!st.accumulates(variant)) {
      compute_epilogue_per_tile(st);
      return st.sch;
    }
    if (!write_back_through_accumulator(st)) return std::nullopt;
    fuse_epilogue_into_write_back(st);
    if (!pack_inputs(st, variant)) return std::nullopt;
    return st.sch;
  }

  // Splits every loop into its levels (spatial loops into S0..S3, reduction loops into
  // R0 R1 or Rb R0 R1) and reorders the block's nest level by level.
  bool split_into_levels(TilingState &st, const TilingVariant &variant) const {
    Schedule &s = st.sch;
    size_t last_spatial = 0;
    int64_t reduction = 1;
    for (size_t i = 0; i < st.loops.size(); ++i) {
      if (st.kinds[i] == LoopKind::kSpatial && s.loop(st.loops[i])->extent > 1) last_spatial = i;
      if (st.kinds[i] != LoopKind::kSpatial) reduction *= s.loop(st.loops[i])->extent;
    }
    if (variant.blocked_reduction && reduction < kMinBlockedReduction) return false;
    // The loop whose innermost tile becomes the vector loop.
    size_t vector_loop = last_spatial;
    size_t vector_s3_position = 0;
    if (variant.other_vector_axis) {
      st.vector_axis = other_vector_axis(st, last_spatial);
      if (!st.vector_axis) return false;
      if (variant.rows_outer && !is_constant_param(s.func(), st.vector_axis->input)) return false;
      vector_loop = st.vector_axis->loop;
      for (size_t i = 0; i < vector_loop; ++i)
        if (st.kinds[i] == LoopKind::kSpatial && s.loop(st.loops[i])->extent > 1) ++vector_s3_position;
    }
    std::vector<std::vector<LoopRV>> &levels = st.levels;
    for (size_t i = 0; i < st.loops.size(); ++i) {
      const LoopRV &loop = st.loops[i];
      // A loop of extent 1 (a 1x1 kernel's window, a batch of one) drives nothing:
      // tiled, its pieces would end up innermost and take the vector loop's place.
      if (s.loop(loop)->extent == 1) {
        levels[kS0].push_back(loop);
        continue;
      }
      std::vector<Level> targets;
      int64_t multiple = 0;
      if (st.kinds[i] == LoopKind::kSpatial) {
        // The innermost spatial tile becomes the vector loop: whole vectors where possible.
        targets = {kS0, kS1, kS2, kS3};
        if (i == vector_loop) multiple = lanes_;
      } else if (variant.blocked_reduction) {
        targets = {kRb, kR0, kR1};
      } else {
        targets = {kR0, kR1};
      }
      const int n = static_cast<int>(targets.size());
      std::optional<std::vector<ir::ExprRV>> factors =
          st.kinds[i] == LoopKind::kSpatial && needs_padded_tiles(s.loop(loop)->extent, i == vector_loop)
              ? s.try_sample_tile(loop, n, max_innermost_, multiple)
              : s.try_sample_perfect_tile(loop, n, max_innermost_, multiple);
      if (!factors) return false;
      std::vector<LoopRV> parts = s.split(loop, std::vector<ir::Factor>(factors->begin(), factors->end()));
      if (i == vector_loop) st.vector_outer = parts[0];
      for (size_t k = 0; k < targets.size(); ++k) levels[targets[k]].push_back(parts[k]);
    }
    if (vector_loop != last_spatial) {
      // Innermost within S3: the vector axis's tile (S3 holds one loop per spatial loop
      // longer than 1, in loop order).
      std::vector<LoopRV> &s3 = levels[kS3];
      KILN_INTERNAL_CHECK(vector_s3_position < s3.size(), "the vector axis has an S3 tile");
      std::rotate(s3.begin() + static_cast<std::ptrdiff_t>(vector_s3_position),
                  s3.begin() + static_cast<std::ptrdiff_t>(vector_s3_position) + 1, s3.end());
    }
    if (variant.packing == Packing::kOncePerPanel || variant.rows_outer) {
      std::vector<LoopRV> &s0 = levels[kS0];
      auto it = std::find_if(s0.begin(), s0.end(), [&](const LoopRV &l) { return l.name == st.vector_outer.name; });
      if (it == s0.end()) return false;
      if (variant.rows_outer)
        std::rotate(it, it + 1, s0.end());
      else
        std::rotate(s0.begin(), it, it + 1);
    }
    std::vector<LoopRV> order;
    for (const auto &level : levels) order.insert(order.end(), level.begin(), level.end());
    s.reorder(order);
    return true;
  }

  static bool is_constant_param(const ir::PrimFunc &f, const ir::BufferNode *buffer) {
    for (size_t i : f.constant_params)
      if (i < f.params.size() && f.params[i].get() == buffer) return true;
    return false;
  }

  // The input a panel would hold (read along the innermost spatial iterator) is indexed
  // by no other spatial iterator, and another spatial iterator (rows) is longer than 1:
  // one packed panel then serves every row tile.
  static bool panel_shared_by_rows(const TilingState &st) {
    ir::NodeRef<ir::BlockNode> b = find_block(st.sch, st.block);
    std::vector<const ir::IterVar *> spatial;
    for (const ir::IterVar &iv : b->iter_vars)
      if (iv.kind == ir::IterKind::kSpatial) spatial.push_back(&iv);
    if (spatial.empty()) return false;
    const ir::VarNode *inner = spatial.back()->var.get();
    std::vector<const ir::VarNode *> rows;
    for (size_t k = 0; k + 1 < spatial.size(); ++k)
      if (spatial[k]->extent > 1) rows.push_back(spatial[k]->var.get());
    if (rows.empty()) return false;
    for (const ir::sched::Access &a : ir::sched::block_reads(b.get())) {
      if (ir::sched::writes_buffer(b.get(), a.buffer.get())) continue;
      bool by_inner = false, by_rows = false;
      for (const ir::Expr &e : a.indices) {
        by_inner = by_inner || ir::uses_var(e, inner);
        for (const ir::VarNode *r : rows) by_rows = by_rows || ir::uses_var(e, r);
      }
      if (by_inner) return !by_rows;
    }
    return false;
  }

  // Spatial extents whose perfect tilings are poor get tiles that need not divide them
  // (the last outer tile is partial): a vector axis longer than the innermost cap and
  // not a multiple of the lanes (197 tokens, 1001 classes, whose factors make 9- or
  // 11-wide vectors), and other axes without a factor fit for a register tile (a prime
  // number of rows). A vector axis within the cap (rows of 56 on AVX-512) stays one
  // innermost tile: LLVM makes 3.5 vectors of it without masks, which measured faster
  // than 4 padded ones. Reductions keep perfect tiles, so an accumulation never runs
  // on padding.
  bool needs_padded_tiles(int64_t extent, bool vector_axis) const {
    if (vector_axis) return extent > max_innermost_ && extent % lanes_ != 0;
    constexpr int64_t kLargestRegisterRows = 8;
    if (extent <= 2 * kLargestRegisterRows) return false;
    for (int64_t d = 2; d <= kLargestRegisterRows; ++d)
      if (extent % d == 0) return false;
    return true;
  }

  // What RejectPoorRegisterTiles checks: whole vectors innermost, and for a register
  // tile (an accumulator's S2 x S3, or the output tile the blocked variant keeps in
  // registers within one reduction block: LLVM promotes it), that it fits.
  static void annotate_register_tile(TilingState &st, const TilingVariant &variant) {
    using ir::annotation::RegisterTile;
    const auto &levels = st.levels;
    size_t tile_begin = levels[kS0].size() + levels[kRb].size() + levels[kS1].size() + levels[kR0].size();
    RegisterTile tile =
        st.accumulates(variant) || variant.blocked_reduction ? RegisterTile::kAccumulator : RegisterTile::kVectors;
    st.sch.annotate(st.block_rv, ir::annotation::kRegisterTile, static_cast<int64_t>(tile));
    st.sch.annotate(st.block_rv, ir::annotation::kRegisterTileLoop, static_cast<int64_t>(tile_begin));
  }

  // Without an accumulator the reduction accumulates in the output itself; an
  // element-wise consumer (bias, activation) then runs per S1 tile right after that
  // tile's reduction, while it is in cache, instead of as a second pass over the output.
  static void compute_epilogue_per_tile(TilingState &st) {
    if (st.levels[kS1].empty()) return;
    for (const std::string &c : consumers_of(st.sch, st.block)) {
      ir::NodeRef<ir::BlockNode> cb = find_block(st.sch, c);
      if (!cb || !is_elementwise(cb.get())) continue;
      Schedule trial = st.sch;
      if (trial.try_reverse_compute_at(trial.get_block(c), st.levels[kS1].back())) st.sch = trial;
      break;
    }
  }

  // The S2 x S3 tile accumulates in a local buffer written back after the reduction,
  // which compaction shrinks to the tile and LLVM keeps in registers.
  static bool write_back_through_accumulator(TilingState &st) {
    std::optional<BlockRV> acc = st.sch.try_cache_write(st.block_rv, 0, "local");
    if (!acc || !st.sch.try_reverse_compute_at(*acc, st.levels[kS1].back())) return false;
    st.accumulator = *acc;
    return true;
  }

  // Element-wise consumers (bias, activation) fuse into the write-back, one after the
  // other (each fused consumer's own consumers become the write-back's).
  static void fuse_epilogue_into_write_back(TilingState &st) {
    std::string acc_name = st.sch.block_name(st.accumulator);
    for (bool fused = true; fused;) {
      fused = false;
      for (const std::string &c : consumers_of(st.sch, acc_name)) {
        ir::NodeRef<ir::BlockNode> cb = find_block(st.sch, c);
        if (!cb || !is_elementwise(cb.get())) continue;
        Schedule trial = st.sch;
        if (trial.try_reverse_compute_inline(trial.get_block(c))) {
          st.sch = trial;
          fused = true;
          break;
        }
      }
    }
  }

  bool pack_inputs(TilingState &st, const TilingVariant &variant) const {
    switch (variant.packing) {
      case Packing::kNone:
      case Packing::kAtReductionBlockIfAny:
        return true;
      case Packing::kAtOuterTile:
        return pack_streamed_input(st.sch, st.block, st.levels[kS0].back());
      case Packing::kOncePerPanel:
        return pack_streamed_input(st.sch, st.block, st.vector_outer);
      case Packing::kAlongVectorAxis: {
        // The weights, read with a long stride along the vector axis, are packed once per
        // outer tile of that axis: at its S0 loop, so the S0 loops of the other axes (the
        // image's rows) reuse the panel instead of packing it again;
        // ir::vector_friendly_layouts puts the axis last in the panel and in the
        // accumulator. The write-back runs along it too, so the accumulator leaves its
        // registers as whole vectors (scattered into the output, once per tile).
        if (!pack_streamed_input(st.sch, st.block, st.vector_outer, &st.vector_axis->iter)) return false;
        const auto &levels = st.levels;
        return move_write_back_dim_innermost(st.sch, st.accumulator, st.vector_axis->output_dim,
                                             levels[kS0].size() + levels[kRb].size() + levels[kS1].size());
      }
    }
    return false;
  }

  // Vectors along the innermost output axis are poor when its extent is not a multiple
  // of the lanes (NCHW rows of 7 or 14) or a read strides along it (a stride-2
  // convolution's input, which then takes a shuffle per vector). Another spatial axis
  // then qualifies when it is a multiple of the lanes, indexes the output in exactly one
  // dimension and one input only, which packing can lay out along it (a convolution's
  // output channels and its weights; the image is then a broadcast).
  std::optional<VectorAxis> other_vector_axis(const TilingState &st, size_t last_spatial) const {
    ir::NodeRef<ir::BlockNode> b = find_block(st.sch, st.block);
    auto iter_of = [&](size_t loop) -> const ir::IterVar * {
      ir::NodeRef<ir::ForNode> l = st.sch.loop(st.loops[loop]);
      for (size_t k = 0; k < b->iter_vars.size(); ++k)
        if (b->iter_values[k].get() == l->loop_var.get()) return &b->iter_vars[k];
      return nullptr;
    };
    std::vector<ir::sched::Access> reads = ir::sched::block_reads(b.get()), writes = ir::sched::block_writes(b.get());
    const ir::IterVar *last = iter_of(last_spatial);
    if (!last || writes.empty()) return std::nullopt;  // no plain innermost output axis
    bool poor = last->extent % lanes_ != 0;
    for (const ir::sched::Access &a : reads)
      for (const ir::Expr &e : a.indices)
        if (ir::uses_var(e, last->var.get()) && !unit_step(e, last->var)) poor = true;
    if (!poor) return std::nullopt;  // the innermost output axis makes whole vectors
    // An axis that is not a multiple of the lanes still makes whole vectors when its
    // tiles are padded (1001 output channels: 63 vectors, the last one masked); taken
    // only where the innermost axis cannot be padded itself (a row within the cap).
    bool padded_axis_allowed = last->extent <= max_innermost_;
    for (size_t i = 0; i < st.loops.size(); ++i) {
      const ir::IterVar *iv = i == last_spatial || st.kinds[i] != LoopKind::kSpatial ? nullptr : iter_of(i);
      bool whole_vectors =
          iv && (iv->extent % lanes_ == 0 || (padded_axis_allowed && needs_padded_tiles(iv->extent, true)));
      if (!whole_vectors) continue;
      std::vector<const ir::BufferNode *> indexed;  // inputs only: the accumulation reads the output
      for (const ir::sched::Access &a : reads)
        for (const ir::Expr &e : a.indices)
          if (ir::uses_var(e, iv->var.get()) && !ir::sched::writes_buffer(b.get(), a.buffer.get()) &&
              std::find(indexed.begin(), indexed.end(), a.buffer.get()) == indexed.end())
            indexed.push_back(a.buffer.get());
      if (indexed.size() != 1) continue;
      const std::vector<ir::Expr> &out = writes.front().indices;
      for (size_t d = 0; d < out.size(); ++d)
        if (out[d].get() == iv->var.get()) return VectorAxis{i, iv->var, d, indexed.front()};
    }
    return std::nullopt;
  }

  static bool unit_step(const ir::Expr &index, const ir::Var &v) {
    ir::Expr next = ir::substitute(index, ir::VarMap{{v.get(), ir::make_add(v, ir::make_int(1))}});
    ir::Expr step = ir::simplify(ir::make_sub(next, index));  // held: as<>() points into it
    return step.as<ir::IntImmNode>() && step.as<ir::IntImmNode>()->value == 1;
  }

  // The write-back nest (one loop per output dimension, under the S1 tile) runs the
  // given output dimension innermost, so the postprocessor vectorizes along it.
  static bool move_write_back_dim_innermost(Schedule &s, const BlockRV &write_back, size_t output_dim,
                                            size_t shared_loops) {
    ir::NodeRef<ir::BlockNode> b = find_block(s, s.block_name(write_back));
    ir::Expr index;
    for (const ir::sched::Access &a : ir::sched::block_reads(b.get()))
      if (a.buffer->scope == ir::MemoryScope::kLocal && output_dim < a.indices.size()) index = a.indices[output_dim];
    if (!index.defined()) return false;  // no accumulator read in the write-back
    std::vector<LoopRV> loops = s.get_loops(write_back);
    std::optional<size_t> driving;
    for (size_t i = shared_loops; i < loops.size(); ++i)
      for (size_t k = 0; k < b->iter_vars.size(); ++k)
        if (ir::uses_var(index, b->iter_vars[k].var.get()) &&
            ir::uses_var(b->iter_values[k], s.loop(loops[i])->loop_var.get()))
          driving = i;
    if (!driving) return false;  // no loop drives the vector axis of the write-back
    std::vector<LoopRV> order(loops.begin() + static_cast<std::ptrdiff_t>(*driving) + 1, loops.end());
    order.push_back(loops[*driving]);
    s.reorder(order);
    return true;
  }

  // The input indexed by the innermost spatial iterator (B of a GEMM, the weights of a
  // dense layer), or by `inner` where given, is copied once per outer tile into a dense
  // panel that the register tiles then stream with unit stride (compaction sizes the
  // panel to the tile). False when there is no such input or the copy cannot go there.
  static bool pack_streamed_input(Schedule &s, const std::string &block, const LoopRV &at,
                                  const ir::Var *inner = nullptr) {
    ir::NodeRef<ir::BlockNode> b = find_block(s, block);
    const ir::Var *last_spatial = nullptr;
    for (const ir::IterVar &iv : b->iter_vars)
      if (iv.kind == ir::IterKind::kSpatial) last_spatial = &iv.var;
    if (!inner) inner = last_spatial;
    // Indexed by it in the last dimension (B of a GEMM) or in another one (the W[n, k]
    // of a dense layer, whose panel ir::vector_friendly_layouts then stores transposed).
    std::vector<ir::Buffer> reads = ir::sched::distinct_buffers(ir::sched::block_reads(b.get()));
    for (bool last_only : {true, false}) {
      for (size_t i = 0; i < reads.size(); ++i) {
        bool streamed = false;
        for (const ir::sched::Access &a : ir::sched::block_reads(b.get())) {
          if (a.buffer != reads[i] || a.indices.empty()) continue;
          if (a.indices.back().get() == inner->get()) streamed = true;
          if (!last_only)
            for (const ir::Expr &e : a.indices) streamed = streamed || e.get() == inner->get();
        }
        if (!streamed || ir::sched::writes_buffer(b.get(), reads[i].get())) continue;
        std::optional<BlockRV> cache = s.try_cache_read(s.get_block(block), static_cast<int>(i), "local");
        return cache && s.try_compute_at(*cache, at);
      }
    }
    return false;
  }

  /// Reductions shorter than this keep a packed panel in cache without blocking.
  static constexpr int64_t kMinBlockedReduction = 1024;
  int64_t max_innermost_, lanes_;
};

}  // namespace

std::shared_ptr<const ScheduleRule> multi_level_tiling_rule(const Target &target) {
  return std::make_shared<MultiLevelTiling>(target);
}

}  // namespace kiln::search
