// Index expressions as linear forms over loop variables, the shape that bounds,
// strides and reuse of buffer accesses are read from.

#pragma once

#include <utility>
#include <vector>

#include "ir/expr.h"

namespace kiln::costmodel {

/// constant + sum(coefficient * variable). `exact` is false when the expression is
/// not affine (floordiv/floormod, min/max, a load, a product of variables): the
/// coefficients are then an approximation good for strides (floordiv(x, c) ~ x / c,
/// floormod(x, c) ~ x, any other variable ~ 1), and bounds must come from the analyzer.
struct LinearForm {
  double constant = 0;
  std::vector<std::pair<const ir::VarNode *, double>> terms;  ///< no zero coefficients
  bool exact = true;

  double coefficient(const ir::VarNode *v) const;
};

LinearForm linear_form(const ir::Expr &e);

}  // namespace kiln::costmodel
