// VectorLoopInnermost: the untuned default's one loop move. A reduction's loops come
// from its compute definition, spatial first: a convolution ends in its kernel window,
// which no vector loop can take. Moving the innermost spatial loop (NHWC's output
// channels, NCHW's columns) below the reduction loops lets the postprocessor vectorize
// it: the weights or the input are then read contiguously along it and the output
// accumulates in place, a vector at a time. The tuned search tiles instead
// (multi_level_tiling); this is for programs that have no database record.
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

class VectorLoopInnermost : public ScheduleRule {
 public:
  std::string name() const override { return "vector_loop_innermost"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || !has_reduction(b.get())) return only(std::move(sch));
    std::vector<LoopKind> kinds = loop_kinds(sch, block);
    size_t last_spatial = kinds.size();
    for (size_t i = kinds.size(); i-- > 0;)
      if (kinds[i] == LoopKind::kSpatial) {
        last_spatial = i;
        break;
      }
    if (last_spatial + 1 >= kinds.size()) return only(std::move(sch));  // none, or already innermost
    for (size_t i = last_spatial + 1; i < kinds.size(); ++i)
      if (kinds[i] != LoopKind::kReduce) return only(std::move(sch));
    ir::Schedule s = sch;
    std::vector<ir::LoopRV> loops = s.get_loops(s.get_block(block));
    std::vector<ir::LoopRV> order(loops.begin() + static_cast<long>(last_spatial) + 1, loops.end());
    order.push_back(loops[last_spatial]);
    try {
      s.reorder(order);
    } catch (const std::exception &) {
      return only(std::move(sch));  // a nest the primitive refuses keeps its order
    }
    return only(std::move(s));
  }
};

}  // namespace

std::shared_ptr<const ScheduleRule> vector_loop_innermost_rule() { return std::make_shared<VectorLoopInnermost>(); }

}  // namespace kiln::search
