// Integer simplification and bounds analysis for index expressions.
//
// The simplifier brings integer expressions to a canonical affine form
// sum(coef * atom) + const, where atoms are variables and the non-linear leftovers
// (floordiv/floormod by constants, min/max, loads). With known variable ranges it
// removes the floordiv/floormod that split, fuse and compute_at introduce, e.g.
// floordiv(o*16 + i, 8) -> o*2 + floordiv(i, 8) and floordiv(x, 4)*4 + floormod(x, 4) -> x,
// and decides comparisons such as the predicates of non-divisible splits.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "ir/expr.h"

namespace kiln::ir {

/// Inclusive constant bounds; kInf marks an unbounded side.
struct Interval {
  static constexpr int64_t kInf = int64_t{1} << 60;
  int64_t min = -kInf;
  int64_t max = kInf;
  bool bounded() const { return min > -kInf && max < kInf; }
  bool is_const() const { return min == max; }
};

class Analyzer {
 public:
  /// Declares v in [0, extent). A loop variable with extent 1 simplifies to 0; block
  /// iterators are bound with `fold_single_value` false, because a block's accesses
  /// must keep naming its iterators for the schedule primitives to recognize them.
  void bind(const Var &v, int64_t extent, bool fold_single_value = true) {
    ranges_[v.get()] = Interval{0, extent - 1};
    if (!fold_single_value) opaque_.insert(v.get());
  }
  void bind(const Var &v, Interval range) { ranges_[v.get()] = range; }
  void unbind(const Var &v) {
    ranges_.erase(v.get());
    opaque_.erase(v.get());
  }

  Expr simplify(const Expr &e) const;
  Interval bounds(const Expr &e) const;
  /// Identifies the ranges in scope: two states with the same value simplify alike
  /// (for memoizing simplifications under the same bindings; equal values of different
  /// states are possible, but as rare as 64-bit hash collisions).
  uint64_t state_hash() const;
  /// True only when `cond` holds for every value of the bound variables.
  bool can_prove(const Expr &cond) const;

  /// Symbolic bounds over the `relaxed` variables: the result may use every other
  /// variable. Sound (never tighter than the truth) for the forms schedules produce.
  Expr symbolic_min(const Expr &e, const std::unordered_set<const VarNode *> &relaxed) const;
  Expr symbolic_max(const Expr &e, const std::unordered_set<const VarNode *> &relaxed) const;

 private:
  std::unordered_map<const VarNode *, Interval> ranges_;
  std::unordered_set<const VarNode *> opaque_;
  friend class SimplifyPass;
};

/// Simplifies without range knowledge.
Expr simplify(const Expr &e);

}  // namespace kiln::ir
