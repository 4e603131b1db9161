// ComputeLocation: blocks left standing (reductions without reuse such as softmax's,
// element-wise outputs, materialized padding) sample where they are computed: at the
// root or inside one of their sole consumer's loops.
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

class ComputeLocation : public ScheduleRule {
 public:
  std::string name() const override { return "compute_location"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || consumers_of(sch, block).size() != 1) return only(std::move(sch));
    // Tiled blocks (more loops than iterators) already have their place.
    if (ir::sched::loops_above(sch.func(), b.get()).size() > b->iter_vars.size()) return only(std::move(sch));
    ir::Schedule placed = sch;
    ir::BlockRV rv = placed.get_block(block);
    std::optional<ir::LoopRV> at = placed.try_sample_compute_location(rv);
    if (!at || !placed.try_compute_at(rv, *at)) return only(std::move(sch));
    return only(std::move(placed));
  }
};

}  // namespace

std::shared_ptr<const ScheduleRule> compute_location_rule() { return std::make_shared<ComputeLocation>(); }

}  // namespace kiln::search
