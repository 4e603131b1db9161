// UnrollTableAxes: blocks whose value is a table written out as selects over a small
// position — `select(i == 0, row0, select(i == 1, row1, ...))` with i an iterator, its
// quotient or its remainder — compute every branch per element unless that position is
// a loop the code generator unrolls: the comparisons then fold and only one row's few
// additions remain, and the unrolled rows share their loads. The Winograd transforms are
// written this way (ops/winograd.cc): the input transform's position is its leading
// iterator, the output transform's is the output row and column modulo the tile.
//
// The rule splits each position off its iterator (y -> y / m, y % m), keeps the
// innermost other iterator (the channels) as a sampled outer tile and an inner vector
// tile, and orders the loops: the rest, the channel tiles, the unrolled positions, the
// channel vector. Element-wise consumers (bias, ReLU, a residual add) are fused first so
// they run on the values while they are in registers. The unchanged sketch is dropped:
// its candidates evaluate every row of the table per element and measured 3-5x slower
// (bench/RESULTS.md), so sampling them only spent builds.

#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

using namespace ir;  // NOLINT: queries over IR nodes

class UnrollTableAxes : public ScheduleRule {
 public:
  explicit UnrollTableAxes(const Target &target) : lanes_(vector_lanes(target)) {}
  std::string name() const override { return "unroll_table_axes"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    NodeRef<BlockNode> b = find_block(sch, block);
    if (!b || has_reduction(b.get()) || b->iter_vars.size() < 2) return only(std::move(sch));
    if (sched::loops_above(sch.func(), b.get()).size() != b->iter_vars.size()) return only(std::move(sch));
    const std::map<size_t, int64_t> period = table_positions(b.get());
    if (period.empty()) return only(std::move(sch));
    // The vector axis: the innermost iterator that is not a position.
    size_t channel = b->iter_vars.size();
    for (size_t k = b->iter_vars.size(); k-- > 0;)
      if (!period.count(k) && b->iter_vars[k].extent > 1) {
        channel = k;
        break;
      }
    if (channel == b->iter_vars.size()) return only(std::move(sch));

    Schedule s = sch;
    // Fused one at a time: once a residual add is inlined, the ReLU after it reads this block.
    for (bool fused = true; fused;) {
      fused = false;
      for (const std::string &c : consumers_of(s, block)) {
        NodeRef<BlockNode> cb = find_block(s, c);
        if (cb && is_elementwise(cb.get()) && s.try_reverse_compute_inline(s.get_block(c))) {
          fused = true;
          break;
        }
      }
    }
    std::vector<LoopRV> loops = s.get_loops(s.get_block(block));
    if (loops.size() != b->iter_vars.size()) return only(std::move(sch));
    std::vector<LoopRV> outer, positions, vector;
    for (size_t k = 0; k < loops.size(); ++k) {
      auto p = period.find(k);
      if (k == channel) {
        std::optional<std::vector<ExprRV>> tile = s.try_sample_perfect_tile(loops[k], 2, lanes_ * 4, lanes_);
        if (!tile) return only(std::move(sch));
        std::optional<std::vector<LoopRV>> parts = s.try_split(loops[k], {(*tile)[0], (*tile)[1]});
        if (!parts) return only(std::move(sch));
        outer.push_back(parts->front());
        vector.push_back(parts->back());
      } else if (p == period.end()) {
        outer.push_back(loops[k]);
      } else if (p->second == s.loop(loops[k])->extent) {
        positions.push_back(loops[k]);
      } else {
        std::optional<std::vector<LoopRV>> parts = s.try_split(loops[k], {int64_t{-1}, p->second});
        if (!parts) return only(std::move(sch));
        outer.push_back(parts->front());
        positions.push_back(parts->back());
      }
    }
    std::vector<LoopRV> order = outer;
    order.insert(order.end(), positions.begin(), positions.end());
    order.insert(order.end(), vector.begin(), vector.end());
    try {
      s.reorder(order);
      for (const LoopRV &l : positions) s.unroll(l);
    } catch (const std::exception &e) {
      return only(std::move(sch));
    }
    return only(std::move(s));
  }

 private:
  int64_t lanes_;
};

}  // namespace

std::shared_ptr<const ScheduleRule> unroll_table_axes_rule(const Target &target) {
  return std::make_shared<UnrollTableAxes>(target);
}

}  // namespace kiln::search
