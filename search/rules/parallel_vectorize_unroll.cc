// ParallelVectorizeUnroll: every block gets annotations that the postprocessor
// RewriteParallelVectorizeUnroll turns into loop kinds: a sampled bound on the fused
// parallel outer loop (a multiple of the cores), the vector loop's bound, and a sampled
// auto-unroll depth. Mutators resample the two sampled ones.
#include "ir/annotations.h"
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

class ParallelVectorizeUnroll : public ScheduleRule {
 public:
  explicit ParallelVectorizeUnroll(const Target &target)
      : cores_(std::max(1, target.num_cores)), vector_lanes_(vector_lanes(target)) {}
  std::string name() const override { return "parallel_vectorize_unroll"; }
  std::vector<ir::Schedule> apply(ir::Schedule s, const std::string &block) const override {
    if (!find_block(s, block)) return only(std::move(s));
    ir::BlockRV b = s.get_block(block);
    ir::ExprRV parallel =
        s.sample_categorical({cores_, cores_ * 4, cores_ * 16, cores_ * 64}, {0.25, 0.25, 0.25, 0.25});
    s.annotate(b, ir::annotation::kParallelExtent, parallel);
    s.annotate(b, ir::annotation::kVectorizeExtent, vector_lanes_ * 4);
    ir::ExprRV unroll = s.sample_categorical({0, 16, 64, 512}, {0.25, 0.25, 0.25, 0.25});
    s.annotate(b, ir::annotation::kUnrollStep, unroll);
    return only(std::move(s));
  }

 private:
  int64_t cores_, vector_lanes_;
};

}  // namespace

std::shared_ptr<const ScheduleRule> parallel_vectorize_unroll_rule(const Target &target) {
  return std::make_shared<ParallelVectorizeUnroll>(target);
}

}  // namespace kiln::search
