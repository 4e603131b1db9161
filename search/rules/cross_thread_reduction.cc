// CrossThreadReduction (cuda targets): a block that reduces rows to one value each (a
// softmax's maximum and sum, a layer norm's mean, pooling) gets one thread block per
// output, whose threads share the row: the reduction loop split into the threads
// (threadIdx.x, the number sampled; mutate_thread_extent changes it) and what each thread
// reduces serially (every threads-th element), then the threads combine their partial
// results. Without it each thread reduces a whole row alone: a 1000-wide softmax over 32
// rows would run 32 threads. A block whose reduction reads an input again (a matrix
// product) is gpu_multi_level_tiling's; the block is also kept as it was, for auto_bind.
// A block that reads such statistics (a softmax's normalization) also gets a sketch in
// which they are computed at its rows: one kernel, the statistics in shared memory.
#include <algorithm>
#include <optional>

#include "ir/schedule/analysis.h"
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

using ir::LoopRV;
using ir::Schedule;

class CrossThreadReduction : public ScheduleRule {
 public:
  explicit CrossThreadReduction(const Target &target) {
    for (int64_t t : {32, 64, 128, 256, 512})
      if (t <= target.max_threads_per_block) threads_.push_back(t);
  }
  std::string name() const override { return "cross_thread_reduction"; }

  std::vector<Schedule> apply(Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || threads_.empty()) return only(std::move(sch));
    std::vector<Schedule> out;
    if (!has_reduction(b.get())) {
      if (std::optional<Schedule> fused = rows_with_their_statistics(sch, block)) out.push_back(std::move(*fused));
    } else if (is_row_statistic(b.get())) {
      if (std::optional<Schedule> shared = share_rows(sch, block)) out.push_back(std::move(*shared));
    }
    out.push_back(std::move(sch));
    return out;
  }

 private:
  // Rows shorter than a warp: one thread per row reduces them as fast.
  static constexpr int64_t kMinReduction = 32;

  static bool is_row_statistic(const ir::BlockNode *b) {
    return has_reduction(b) && reduction_size(b) >= kMinReduction && !reads_an_input_again(b);
  }

  // A block that reads rows' statistics (a softmax's normalization reads the rows'
  // maxima and sums, a layer norm's output their means and variances), reached first
  // since consumers come first: one thread block per row, its threads across the row,
  // and each statistic computed at that row by the same threads (split as share_rows
  // does), so the statistics stay in shared memory and the whole softmax is one kernel
  // instead of one per statistic plus one, each writing and reading global memory.
  std::optional<Schedule> rows_with_their_statistics(const Schedule &original, const std::string &block) const {
    Schedule sch = original;
    // The statistics the block reads, and those they read in turn.
    std::vector<std::string> stats, pending = producers_of(sch, block);
    while (!pending.empty()) {
      std::string name = pending.back();
      pending.pop_back();
      ir::NodeRef<ir::BlockNode> p = find_block(sch, name);
      if (!p || !is_row_statistic(p.get()) || std::count(stats.begin(), stats.end(), name)) continue;
      stats.push_back(name);
      for (std::string &q : producers_of(sch, name)) pending.push_back(std::move(q));
    }
    if (stats.empty()) return std::nullopt;
    const int64_t rows = spatial_size(find_block(sch, stats[0]).get());
    for (const std::string &name : stats)
      if (spatial_size(find_block(sch, name).get()) != rows) return std::nullopt;
    // The block's leading loops that walk the rows, then those along a row.
    std::vector<LoopRV> loops = sch.get_loops(sch.get_block(block));
    int64_t walked = 1;
    size_t row_loops = 0;
    for (; row_loops < loops.size() && walked < rows; ++row_loops) walked *= sch.loop(loops[row_loops])->extent;
    if (walked != rows || row_loops == loops.size()) return std::nullopt;
    for (const LoopRV &loop : loops)
      if (sch.loop(loop)->for_kind != ir::ForKind::kSerial) return std::nullopt;  // scheduled already
    std::vector<LoopRV> row_part(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(row_loops));
    std::vector<LoopRV> along(loops.begin() + static_cast<std::ptrdiff_t>(row_loops), loops.end());
    LoopRV row = fuse_loops(sch, row_part);
    LoopRV cols = fuse_loops(sch, along);
    ir::ExprRV threads = sample_threads(sch);
    LoopRV thread = split_for_threads(sch, cols, threads);
    sch.bind(row, "blockIdx.x");
    sch.bind(thread, "threadIdx.x");
    // Consumers before their producers: program order, reversed.
    std::vector<std::string> order = sch.block_names();
    std::sort(stats.begin(), stats.end(), [&](const std::string &a, const std::string &b) {
      return std::find(order.begin(), order.end(), a) > std::find(order.begin(), order.end(), b);
    });
    for (const std::string &name : stats) {
      ir::BlockRV stat = sch.get_block(name);
      if (!sch.try_compute_at(stat, row)) return std::nullopt;
      std::vector<LoopKind> kinds = loop_kinds(sch, name);
      std::vector<LoopRV> own = sch.get_loops(stat);
      std::vector<LoopRV> reduce;
      for (size_t i = 1; i < own.size(); ++i) {
        if (kinds[i] == LoopKind::kReduce)
          reduce.push_back(own[i]);
        else if (kinds[i] == LoopKind::kMixed || sch.loop(own[i])->extent != 1 || !reduce.empty())
          return std::nullopt;  // more than the row's one value, or a spatial loop inside the reduction
      }
      if (reduce.empty()) return std::nullopt;
      sch.bind(split_for_threads(sch, fuse_loops(sch, reduce), threads), "threadIdx.x");
    }
    return sch;
  }

  // Spatial loops outermost, then the reductions: the spatial ones fused to blockIdx.x,
  // the reductions fused and split into a thread part (threadIdx.x, outermost of the
  // two) and a serial part.
  std::optional<Schedule> share_rows(const Schedule &original, const std::string &block) const {
    Schedule sch = original;
    std::vector<LoopKind> kinds = loop_kinds(sch, block);
    std::vector<LoopRV> loops = sch.get_loops(sch.get_block(block));
    std::vector<LoopRV> spatial, reduce;
    for (size_t i = 0; i < loops.size(); ++i) {
      if (sch.loop(loops[i])->for_kind != ir::ForKind::kSerial) return std::nullopt;  // scheduled already
      if (kinds[i] == LoopKind::kMixed) return std::nullopt;
      if (kinds[i] == LoopKind::kSpatial) {
        if (!reduce.empty()) return std::nullopt;  // a spatial loop inside the reduction
        spatial.push_back(loops[i]);
      } else {
        reduce.push_back(loops[i]);
      }
    }
    if (spatial.empty() || reduce.empty()) return std::nullopt;
    LoopRV rows = fuse_loops(sch, spatial);
    LoopRV row = fuse_loops(sch, reduce);
    LoopRV thread = split_for_threads(sch, row, sample_threads(sch));
    sch.bind(rows, "blockIdx.x");
    sch.bind(thread, "threadIdx.x");
    return sch;
  }

  ir::ExprRV sample_threads(Schedule &sch) const {
    return sch.sample_categorical(threads_,
                                  std::vector<double>(threads_.size(), 1.0 / static_cast<double>(threads_.size())));
  }

  // The loop split into a part of `threads` iterations, moved outermost and returned
  // (for threadIdx.x), and a serial part each thread runs (every threads-th iteration).
  static LoopRV split_for_threads(Schedule &sch, const LoopRV &loop, const ir::ExprRV &threads) {
    std::vector<LoopRV> parts = sch.split(loop, {int64_t{-1}, threads});
    sch.reorder({parts[1], parts[0]});
    return parts[1];
  }

  std::vector<int64_t> threads_;
};

}  // namespace

std::shared_ptr<const ScheduleRule> cross_thread_reduction_rule(const Target &target) {
  return std::make_shared<CrossThreadReduction>(target);
}

}  // namespace kiln::search
