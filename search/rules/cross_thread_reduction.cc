// CrossThreadReduction (cuda targets): a block that reduces rows to one value each (a
// softmax's maximum and sum, a layer norm's mean, pooling) gets one thread block per
// output, whose threads share the row: the reduction loop split into the threads
// (threadIdx.x, the number sampled; mutate_thread_extent changes it) and what each thread
// reduces serially (every threads-th element), then the threads combine their partial
// results. Without it each thread reduces a whole row alone: a 1000-wide softmax over 32
// rows would run 32 threads. A block whose reduction reads an input again (a matrix
// product) is gpu_multi_level_tiling's; the block is also kept as it was, for auto_bind.
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
    if (!b || threads_.empty() || !has_reduction(b.get()) || reduction_size(b.get()) < kMinReduction ||
        reads_an_input_again(b.get()))
      return only(std::move(sch));
    std::vector<Schedule> out;
    if (std::optional<Schedule> shared = share_rows(sch, block)) out.push_back(std::move(*shared));
    out.push_back(std::move(sch));
    return out;
  }

 private:
  // Rows shorter than a warp: one thread per row reduces them as fast.
  static constexpr int64_t kMinReduction = 32;

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
    LoopRV rows = spatial.size() == 1 ? spatial[0] : sch.fuse(spatial);
    LoopRV row = reduce.size() == 1 ? reduce[0] : sch.fuse(reduce);
    ir::ExprRV threads = sch.sample_categorical(
        threads_, std::vector<double>(threads_.size(), 1.0 / static_cast<double>(threads_.size())));
    std::vector<LoopRV> parts = sch.split(row, {int64_t{-1}, threads});
    sch.reorder({parts[1], parts[0]});
    sch.bind(rows, "blockIdx.x");
    sch.bind(parts[1], "threadIdx.x");
    return sch;
  }

  std::vector<int64_t> threads_;
};

}  // namespace

std::shared_ptr<const ScheduleRule> cross_thread_reduction_rule(const Target &target) {
  return std::make_shared<CrossThreadReduction>(target);
}

}  // namespace kiln::search
