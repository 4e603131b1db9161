// GpuUnroll (cuda targets): every block gets a sampled auto-unroll depth (0, 16, 64, 512
// or 1024 innermost iterations, Ansor's GPU choices; mutate_unroll resamples it), which
// rewrite_gpu_unroll turns into the unroll pragma on the block's outermost serial loop
// inside its thread bindings: a thread's loops whose whole subtree runs at most that
// many iterations are unrolled, trading instructions for the branches and index
// arithmetic of short loops (a reduction slice, a thread's own outputs, a serial tail).
#include "ir/annotations.h"
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

class GpuUnroll : public ScheduleRule {
 public:
  std::string name() const override { return "gpu_unroll"; }
  std::vector<ir::Schedule> apply(ir::Schedule s, const std::string &block) const override {
    if (!find_block(s, block)) return only(std::move(s));
    ir::ExprRV unroll = s.sample_categorical({0, 16, 64, 512, 1024}, {0.2, 0.2, 0.2, 0.2, 0.2});
    s.annotate(s.get_block(block), ir::annotation::kUnrollStep, unroll);
    return only(std::move(s));
  }
};

}  // namespace

std::shared_ptr<const ScheduleRule> gpu_unroll_rule() { return std::make_shared<GpuUnroll>(); }

}  // namespace kiln::search
