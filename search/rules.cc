// Schedule rules for CPUs, in the order they run on each block:
//   AutoInline             element-wise producers disappear into their consumers
//                          (padding may also stay, placed by ComputeLocation)
//   MultiLevelTiling       "SSRSRS" tiling of blocks with reductions, with a register-
//                          tile accumulator (cache_write + reverse_compute_at) and the
//                          element-wise epilogue fused into its write-back; for long
//                          reductions also "SRSRSRS", blocked outside the tiles; and
//                          where the innermost output axis makes poor vectors (rows of
//                          7 or 14, stride-2 reads) a variant vectorized over another
//                          axis (a convolution's output channels) with packed weights
//   ComputeLocation        other blocks pick where they are computed (sampled)
//   ParallelVectorizeUnroll annotations the postprocessor turns into loop kinds
#include <algorithm>
#include <optional>

#include "ir/functor.h"
#include "search/block_info.h"
#include "search/space.h"

namespace kiln::search {
namespace {

using ir::BlockRV;
using ir::LoopRV;
using ir::Schedule;
using ir::ScheduleError;

class AutoInline : public ScheduleRule {
 public:
  std::string name() const override { return "auto_inline"; }
  std::vector<Schedule> apply(const Schedule &sch, const std::string &block) const override {
    const ir::BlockNode *b = find_block(sch, block);
    if (!b || !is_elementwise(b) || consumers_of(sch, block).empty()) return {sch};
    Schedule s = sch;
    try {
      s.compute_inline(s.get_block(block));
    } catch (const ScheduleError &) {
      return {sch};
    }
    if (is_padding(b)) return {s, sch};
    return {s};
  }
};

class MultiLevelTiling : public ScheduleRule {
 public:
  explicit MultiLevelTiling(const Target &target)
      : max_innermost_(target.vector_width_bits >= 512 ? 64 : 32), lanes_(vector_lanes(target)) {}
  std::string name() const override { return "multi_level_tiling"; }

  std::vector<Schedule> apply(const Schedule &sch, const std::string &block) const override {
    const ir::BlockNode *b = find_block(sch, block);
    if (!b || !has_reduction(b) || spatial_size(b) < 4) return {sch};
    std::vector<int> kinds = loop_kinds(sch, block);
    if (std::count(kinds.begin(), kinds.end(), kLoopMixed)) return {sch};
    std::vector<Schedule> out;
    for (int variant : {kAccumulatorAndPacking, kAccumulator, kPlain, kBlockedReduction, kOtherVectorAxis}) {
      try {
        out.push_back(tile(sch, block, kinds, variant));
      } catch (const ScheduleError &) {
        // This variant does not apply to this block.
      }
    }
    return out.empty() ? std::vector<Schedule>{sch} : out;
  }

 private:
  static constexpr int kAccumulatorAndPacking = 0, kAccumulator = 1, kPlain = 2, kBlockedReduction = 3,
                       kOtherVectorAxis = 4;

  Schedule tile(const Schedule &sch, const std::string &block, const std::vector<int> &kinds, int variant) const {
    Schedule s = sch;
    BlockRV b = s.get_block(block);
    std::vector<LoopRV> loops = s.get_loops(b);
    // S0 S1 R0 S2 R1 S3; kBlockedReduction adds an outermost reduction level after S0
    // (S0 Rb S1 R0 S2 R1 S3): the output accumulates across its blocks, and the packed
    // panel holds one block of the reduction, so it stays in cache for a long reduction.
    bool blocked = variant == kBlockedReduction;
    const size_t kS0 = 0, kRb = 1, kS1 = 2, kR0 = 3, kS2 = 4, kR1 = 5, kS3 = 6;
    std::vector<std::vector<LoopRV>> levels(7);
    size_t last_spatial = 0;
    int64_t reduction = 1;
    for (size_t i = 0; i < loops.size(); ++i) {
      if (kinds[i] == kLoopSpatial && s.loop(loops[i])->extent > 1) last_spatial = i;
      if (kinds[i] != kLoopSpatial) reduction *= s.loop(loops[i])->extent;
    }
    if (blocked && reduction < kMinBlockedReduction)
      throw ScheduleError("multi_level_tiling", "reduction too short to block");
    // The loop whose innermost tile becomes the vector loop.
    size_t vector_loop = last_spatial;
    VectorAxis axis;
    LoopRV vector_outer;  // the vector axis's S0 loop
    size_t vector_s3_position = 0;
    if (variant == kOtherVectorAxis) {
      axis = other_vector_axis(s, block, loops, kinds, last_spatial);
      vector_loop = axis.loop;
      for (size_t i = 0; i < vector_loop; ++i)
        if (kinds[i] == kLoopSpatial && s.loop(loops[i])->extent > 1) ++vector_s3_position;
    }
    for (size_t i = 0; i < loops.size(); ++i) {
      // A loop of extent 1 (a 1x1 kernel's window, a batch of one) drives nothing:
      // tiled, its pieces would end up innermost and take the vector loop's place.
      if (s.loop(loops[i])->extent == 1) {
        levels[kS0].push_back(loops[i]);
        continue;
      }
      if (kinds[i] == kLoopSpatial) {
        // The innermost spatial tile becomes the vector loop: whole vectors where possible.
        std::vector<ir::ExprRV> t =
            s.sample_perfect_tile(loops[i], 4, max_innermost_, std::nullopt, i == vector_loop ? lanes_ : 0);
        std::vector<LoopRV> parts = s.split(loops[i], {t[0], t[1], t[2], t[3]});
        if (i == vector_loop) vector_outer = parts[0];
        levels[kS0].push_back(parts[0]);
        levels[kS1].push_back(parts[1]);
        levels[kS2].push_back(parts[2]);
        levels[kS3].push_back(parts[3]);
      } else if (blocked) {
        std::vector<ir::ExprRV> t = s.sample_perfect_tile(loops[i], 3, max_innermost_);
        std::vector<LoopRV> parts = s.split(loops[i], {t[0], t[1], t[2]});
        levels[kRb].push_back(parts[0]);
        levels[kR0].push_back(parts[1]);
        levels[kR1].push_back(parts[2]);
      } else {
        std::vector<ir::ExprRV> t = s.sample_perfect_tile(loops[i], 2, max_innermost_);
        std::vector<LoopRV> parts = s.split(loops[i], {t[0], t[1]});
        levels[kR0].push_back(parts[0]);
        levels[kR1].push_back(parts[1]);
      }
    }
    if (vector_loop != last_spatial) {
      // Innermost within S3: the vector axis's tile (S3 holds one loop per spatial loop
      // longer than 1, in loop order).
      std::vector<LoopRV> &s3 = levels[kS3];
      size_t pos = vector_s3_position;
      std::rotate(s3.begin() + static_cast<std::ptrdiff_t>(pos), s3.begin() + static_cast<std::ptrdiff_t>(pos) + 1,
                  s3.end());
    }
    std::vector<LoopRV> order;
    for (const auto &level : levels) order.insert(order.end(), level.begin(), level.end());
    s.reorder(order);
    size_t tile_begin = levels[kS0].size() + levels[kRb].size() + levels[kS1].size() + levels[kR0].size();
    // What RejectPoorRegisterTiles checks: whole vectors innermost, and for a register
    // tile (an accumulator's S2 x S3, or the output tile the blocked variant keeps in
    // registers within one reduction block: LLVM promotes it), that it fits.
    bool accumulates = variant != kPlain && !levels[kS1].empty();
    s.annotate(b, "kiln.register_tile", accumulates || blocked ? 2 : 1);
    s.annotate(b, "kiln.register_tile_loop", static_cast<int64_t>(tile_begin));
    if (blocked) {
      try {
        pack_streamed_input(s, block, levels[kRb].back());
      } catch (const ScheduleError &) {
        // Nothing to pack (a convolution's window reads): the blocking alone remains.
      }
      return s;
    }
    if (!accumulates) {
      // Plain tiling accumulates in the output itself; an element-wise consumer (bias,
      // activation) then runs per S1 tile right after that tile's reduction, while it
      // is in cache, instead of as a second pass over the whole output.
      if (!levels[kS1].empty()) {
        for (const std::string &c : consumers_of(s, block)) {
          const ir::BlockNode *cb = find_block(s, c);
          if (!cb || !is_elementwise(cb)) continue;
          try {
            Schedule t = s;
            t.reverse_compute_at(t.get_block(c), levels[kS1].back());
            s = t;
          } catch (const ScheduleError &) {
          }
          break;
        }
      }
      return s;
    }
    // The S2 x S3 tile accumulates in a local buffer written back after the reduction,
    // which compaction shrinks to the tile and LLVM keeps in registers.
    BlockRV acc = s.cache_write(b, 0, "local");
    s.reverse_compute_at(acc, levels[kS1].back());
    // Element-wise consumers (bias, activation) fuse into the write-back.
    std::string acc_name = s.block_name(acc);
    for (bool fused = true; fused;) {
      fused = false;
      for (const std::string &c : consumers_of(s, acc_name)) {
        const ir::BlockNode *cb = find_block(s, c);
        if (!cb || !is_elementwise(cb)) continue;
        try {
          Schedule t = s;
          t.reverse_compute_inline(t.get_block(c));
          s = t;
          fused = true;
          break;
        } catch (const ScheduleError &) {
        }
      }
    }
    if (variant == kAccumulatorAndPacking) pack_streamed_input(s, block, levels[kS0].back());
    if (variant == kOtherVectorAxis) {
      // The weights, read with a long stride along the vector axis, are packed once per
      // outer tile of that axis: at its S0 loop, so the S0 loops of the other axes (the
      // image's rows) reuse the panel instead of packing it again; ir::vector_friendly_layouts
      // puts the axis last in the panel and in the accumulator. The write-back runs along
      // it too, so the accumulator leaves its registers as whole vectors (scattered into
      // the output, once per tile).
      pack_streamed_input(s, block, vector_outer, &axis.iter);
      move_write_back_dim_innermost(s, acc, axis.output_dim,
                                    levels[kS0].size() + levels[kRb].size() + levels[kS1].size());
    }
    return s;
  }

  struct VectorAxis {
    size_t loop = 0;        // among the block's loops before tiling
    ir::Var iter;           // the spatial iterator it drives
    size_t output_dim = 0;  // the dimension of the output that iterator indexes
  };

  // Vectors along the innermost output axis are poor when its extent is not a multiple
  // of the lanes (NCHW rows of 7 or 14) or a read strides along it (a stride-2
  // convolution's input, which then takes a shuffle per vector). Another spatial axis
  // then qualifies when it is a multiple of the lanes, indexes the output in exactly one
  // dimension and one input only, which packing can lay out along it (a convolution's
  // output channels and its weights; the image is then a broadcast).
  VectorAxis other_vector_axis(const Schedule &s, const std::string &block, const std::vector<LoopRV> &loops,
                               const std::vector<int> &kinds, size_t last_spatial) const {
    const ir::BlockNode *b = find_block(s, block);
    auto iter_of = [&](size_t loop) -> const ir::IterVar * {
      const ir::ForNode *l = s.loop(loops[loop]);
      for (size_t k = 0; k < b->iter_vars.size(); ++k)
        if (b->iter_values[k].get() == l->loop_var.get()) return &b->iter_vars[k];
      return nullptr;
    };
    std::vector<ir::sched::Access> reads = ir::sched::block_reads(b), writes = ir::sched::block_writes(b);
    const ir::IterVar *last = iter_of(last_spatial);
    if (!last || writes.empty()) throw ScheduleError("multi_level_tiling", "no plain innermost output axis");
    bool poor = last->extent % lanes_ != 0;
    for (const ir::sched::Access &a : reads)
      for (const ir::Expr &e : a.indices)
        if (ir::uses_var(e, last->var.get()) && !unit_step(e, last->var)) poor = true;
    if (!poor) throw ScheduleError("multi_level_tiling", "the innermost output axis makes whole vectors");
    for (size_t i = 0; i < loops.size(); ++i) {
      const ir::IterVar *iv = i == last_spatial || kinds[i] != kLoopSpatial ? nullptr : iter_of(i);
      if (!iv || iv->extent % lanes_ != 0) continue;
      std::vector<const ir::BufferNode *> indexed;  // inputs only: the accumulation reads the output
      for (const ir::sched::Access &a : reads)
        for (const ir::Expr &e : a.indices)
          if (ir::uses_var(e, iv->var.get()) && !ir::sched::writes_buffer(b, a.buffer.get()) &&
              std::find(indexed.begin(), indexed.end(), a.buffer.get()) == indexed.end())
            indexed.push_back(a.buffer.get());
      if (indexed.size() != 1) continue;
      const std::vector<ir::Expr> &out = writes.front().indices;
      for (size_t d = 0; d < out.size(); ++d)
        if (out[d].get() == iv->var.get()) return VectorAxis{i, iv->var, d};
    }
    throw ScheduleError("multi_level_tiling", "no other axis to vectorize");
  }

  static bool unit_step(const ir::Expr &index, const ir::Var &v) {
    ir::Expr next = ir::substitute(index, ir::VarMap{{v.get(), ir::make_add(v, ir::make_int(1))}});
    const auto *step = ir::simplify(ir::make_sub(next, index)).as<ir::IntImmNode>();
    return step && step->value == 1;
  }

  // The write-back nest (one loop per output dimension, under the S1 tile) runs the
  // given output dimension innermost, so the postprocessor vectorizes along it.
  static void move_write_back_dim_innermost(Schedule &s, const BlockRV &write_back, size_t output_dim,
                                            size_t shared_loops) {
    const ir::BlockNode *b = find_block(s, s.block_name(write_back));
    ir::Expr index;
    for (const ir::sched::Access &a : ir::sched::block_reads(b))
      if (a.buffer->scope == ir::MemoryScope::kLocal && output_dim < a.indices.size()) index = a.indices[output_dim];
    if (!index.defined()) throw ScheduleError("multi_level_tiling", "no accumulator read in the write-back");
    std::vector<LoopRV> loops = s.get_loops(write_back);
    std::optional<size_t> driving;
    for (size_t i = shared_loops; i < loops.size(); ++i)
      for (size_t k = 0; k < b->iter_vars.size(); ++k)
        if (ir::uses_var(index, b->iter_vars[k].var.get()) &&
            ir::uses_var(b->iter_values[k], s.loop(loops[i])->loop_var.get()))
          driving = i;
    if (!driving) throw ScheduleError("multi_level_tiling", "no loop drives the vector axis of the write-back");
    std::vector<LoopRV> order(loops.begin() + static_cast<std::ptrdiff_t>(*driving) + 1, loops.end());
    order.push_back(loops[*driving]);
    s.reorder(order);
  }

  // The input indexed by the innermost spatial iterator (B of a GEMM, the weights of a
  // dense layer), or by `inner` where given, is copied once per outer tile into a dense
  // panel that the register tiles then stream with unit stride (compaction sizes the
  // panel to the tile).
  static void pack_streamed_input(Schedule &s, const std::string &block, const LoopRV &at,
                                  const ir::Var *inner = nullptr) {
    const ir::BlockNode *b = find_block(s, block);
    const ir::Var *last_spatial = nullptr;
    for (const ir::IterVar &iv : b->iter_vars)
      if (iv.kind == ir::IterKind::kSpatial) last_spatial = &iv.var;
    if (!inner) inner = last_spatial;
    // Indexed by it in the last dimension (B of a GEMM) or in another one (the W[n, k]
    // of a dense layer, whose panel ir::vector_friendly_layouts then stores transposed).
    std::vector<ir::Buffer> reads = ir::sched::distinct_buffers(ir::sched::block_reads(b));
    for (bool last_only : {true, false}) {
      for (size_t i = 0; i < reads.size(); ++i) {
        bool streamed = false;
        for (const ir::sched::Access &a : ir::sched::block_reads(b)) {
          if (a.buffer != reads[i] || a.indices.empty()) continue;
          if (a.indices.back().get() == inner->get()) streamed = true;
          if (!last_only)
            for (const ir::Expr &e : a.indices) streamed = streamed || e.get() == inner->get();
        }
        if (!streamed || ir::sched::writes_buffer(b, reads[i].get())) continue;
        BlockRV cache = s.cache_read(s.get_block(block), static_cast<int>(i), "local");
        s.compute_at(cache, at);
        return;
      }
    }
    throw ScheduleError("multi_level_tiling", "no streamed input to pack");
  }

  /// Reductions shorter than this keep a packed panel in cache without blocking.
  static constexpr int64_t kMinBlockedReduction = 1024;
  int64_t max_innermost_, lanes_;
};

// Blocks left standing (reductions without reuse such as softmax's, element-wise
// outputs) sample where they are computed: at the root or inside a consumer's loops.
class ComputeLocation : public ScheduleRule {
 public:
  std::string name() const override { return "compute_location"; }
  std::vector<Schedule> apply(const Schedule &sch, const std::string &block) const override {
    const ir::BlockNode *b = find_block(sch, block);
    if (!b || consumers_of(sch, block).size() != 1) return {sch};
    // Tiled blocks (more loops than iterators) already have their place.
    if (ir::sched::loops_above(sch.func(), b).size() > b->iter_vars.size()) return {sch};
    Schedule s = sch;
    try {
      BlockRV rv = s.get_block(block);
      LoopRV at = s.sample_compute_location(rv);
      s.compute_at(rv, at);
      return {s};
    } catch (const ScheduleError &) {
      return {sch};
    }
  }
};

class ParallelVectorizeUnroll : public ScheduleRule {
 public:
  explicit ParallelVectorizeUnroll(const Target &target)
      : cores_(std::max(1, target.num_cores)), vector_lanes_(vector_lanes(target)) {}
  std::string name() const override { return "parallel_vectorize_unroll"; }
  std::vector<Schedule> apply(const Schedule &sch, const std::string &block) const override {
    if (!find_block(sch, block)) return {sch};
    Schedule s = sch;
    BlockRV b = s.get_block(block);
    ir::ExprRV parallel =
        s.sample_categorical({cores_, cores_ * 4, cores_ * 16, cores_ * 64}, {0.25, 0.25, 0.25, 0.25});
    s.annotate(b, "kiln.parallel", parallel);
    s.annotate(b, "kiln.vectorize", vector_lanes_ * 4);
    ir::ExprRV unroll = s.sample_categorical({0, 16, 64, 512}, {0.25, 0.25, 0.25, 0.25});
    s.annotate(b, "kiln.unroll", unroll);
    return {s};
  }

 private:
  int64_t cores_, vector_lanes_;
};

}  // namespace

std::vector<std::unique_ptr<ScheduleRule>> default_rules(const Target &target) {
  std::vector<std::unique_ptr<ScheduleRule>> rules;
  rules.push_back(std::make_unique<AutoInline>());
  rules.push_back(std::make_unique<MultiLevelTiling>(target));
  rules.push_back(std::make_unique<ComputeLocation>());
  rules.push_back(std::make_unique<ParallelVectorizeUnroll>(target));
  return rules;
}

std::vector<std::unique_ptr<ScheduleRule>> untuned_rules(const Target &target) {
  std::vector<std::unique_ptr<ScheduleRule>> rules;
  rules.push_back(std::make_unique<AutoInline>());
  rules.push_back(std::make_unique<ParallelVectorizeUnroll>(target));
  return rules;
}

}  // namespace kiln::search
