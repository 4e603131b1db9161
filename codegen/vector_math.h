// exp, erf and tanh for float32 scalars and vectors as straight-line LLVM IR.
//
// Why: LLVM lowers `llvm.exp` on a vector, and any libm call, to one scalar call per
// lane. A BERT dense layer's fused GELU (erf per output element) spent more time in
// 8 scalar erff calls per vector than in its matrix product. These are polynomials
// evaluated in the vector registers, branch-free (both halves of a piecewise form are
// computed and one is selected), used for vectors and scalars alike so that a
// vectorized program and the unscheduled reference round the same way.
//
// Accuracy (measured against double-precision libm over the whole float range the
// function is not saturated in): exp within 1.2e-7 relative (overflow to +inf above
// 88.72, exactly 0 below -87.34 = ln(FLT_MIN): no denormals, which cost a microcode
// assist each on x86), erf within 1.8e-7 relative for
// |x| <= 1 and 1.1e-7 absolute beyond, tanh within 1.5e-7 relative. NaN in, NaN out.
// The coefficients are Chebyshev interpolants fitted for these ranges.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen {

/// Each takes and returns a float or a vector of floats.
llvm::Value *emit_exp_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_erf_f32(llvm::IRBuilder<> &b, llvm::Value *x);
llvm::Value *emit_tanh_f32(llvm::IRBuilder<> &b, llvm::Value *x);

}  // namespace kiln::codegen
