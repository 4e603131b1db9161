// AutoInline: element-wise producers disappear into their consumers. Zero padding is
// the exception worth a choice: inlined, its condition lands in the consumer's
// innermost loop; materialized (and placed by ComputeLocation), that loop stays
// branch-free. The rule fans out to both. A table written out as selects over a position
// (a Winograd transform) stays a block of its own: unroll_table_axes unrolls the
// position and fuses the consumers into it instead.
#include <optional>

#include "ir/schedule/primitives.h"
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

class AutoInline : public ScheduleRule {
 public:
  std::string name() const override { return "auto_inline"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    ir::NodeRef<ir::BlockNode> b = find_block(sch, block);
    if (!b || !is_elementwise(b.get()) || consumers_of(sch, block).empty()) return only(std::move(sch));
    if (!table_positions(b.get()).empty()) return only(std::move(sch));
    // Asked first, so that a block that stays leaves no get_block in the trace.
    try {
      ir::sched::check_compute_inline(sch.func(), block);
    } catch (const ir::ScheduleError &) {
      return only(std::move(sch));
    }
    std::optional<ir::Schedule> materialized;
    if (is_padding(b.get())) materialized = sch;
    sch.compute_inline(sch.get_block(block));
    std::vector<ir::Schedule> out = only(std::move(sch));
    if (materialized) out.push_back(std::move(*materialized));
    return out;
  }
};

}  // namespace

std::shared_ptr<const ScheduleRule> auto_inline_rule() { return std::make_shared<AutoInline>(); }

}  // namespace kiln::search
