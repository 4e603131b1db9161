// AutoBind (cuda targets): a block's spatial loops fused and spread over blocks of
// threads, the number of threads per block sampled (mutate_thread_extent changes it);
// its reduction runs serially in each thread. The GPU space's floor: every program it
// gives runs on a GPU. Tiling with shared memory, cross-thread reductions and the
// rest of the GPU rules come with the GPU search space.
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

class AutoBind : public ScheduleRule {
 public:
  explicit AutoBind(const Target &target) {
    for (int64_t t : {32, 64, 128, 256, 512, 1024})
      if (t <= target.max_threads_per_block) threads_.push_back(t);
  }
  std::string name() const override { return "auto_bind"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || threads_.empty()) return only(std::move(sch));
    ir::Schedule bound = sch;
    ir::ExprRV threads = bound.sample_categorical(
        threads_, std::vector<double>(threads_.size(), 1.0 / static_cast<double>(threads_.size())));
    if (!bind_spatial_loops(bound, block, threads)) return only(std::move(sch));
    return only(std::move(bound));
  }

 private:
  std::vector<int64_t> threads_;
};

}  // namespace

std::shared_ptr<const ScheduleRule> auto_bind_rule(const Target &target) { return std::make_shared<AutoBind>(target); }

}  // namespace kiln::search
