#include "codegen/vector_math.h"

#include <llvm/IR/Intrinsics.h>

#include <initializer_list>
#include <utility>

namespace kiln::codegen {
namespace {

llvm::Value *constant(llvm::Value *like, double c) { return llvm::ConstantFP::get(like->getType(), c); }

llvm::Value *call(llvm::IRBuilder<> &b, llvm::Intrinsic::ID id, std::initializer_list<llvm::Value *> args) {
  return b.CreateIntrinsic(id, {(*args.begin())->getType()}, args);
}

llvm::Value *mul_add(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y, llvm::Value *z) {
  return call(b, llvm::Intrinsic::fmuladd, {x, y, z});
}

// sum c_i x^i, coefficients from the highest power down.
llvm::Value *horner(llvm::IRBuilder<> &b, llvm::Value *x, std::initializer_list<double> highest_first) {
  auto it = highest_first.begin();
  llvm::Value *acc = constant(x, *it++);
  for (; it != highest_first.end(); ++it) acc = mul_add(b, acc, x, constant(x, *it));
  return acc;
}

// sum c_j T_j(t) for Chebyshev polynomials T_j, t in [-1, 1]; coefficients c_0 first.
// Clenshaw's recurrence: stable in float where the expanded power form is not.
llvm::Value *chebyshev(llvm::IRBuilder<> &b, llvm::Value *t, std::initializer_list<double> c0_first) {
  const double *c = c0_first.begin();
  size_t n = c0_first.size();
  llvm::Value *two_t = b.CreateFAdd(t, t);
  llvm::Value *b1 = constant(t, 0.0), *b2 = constant(t, 0.0);
  for (size_t j = n - 1; j >= 1; --j) {
    llvm::Value *b0 = b.CreateFAdd(mul_add(b, two_t, b1, b.CreateFNeg(b2)), constant(t, c[j]));
    b2 = b1;
    b1 = b0;
  }
  return b.CreateFAdd(mul_add(b, t, b1, b.CreateFNeg(b2)), constant(t, c[0]));
}

llvm::Value *propagate_nan(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *result) {
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
}

// 2^k for an integral float k in [-150, 129] as two factors whose exponent fields stay
// normal; multiplied into a value one after the other, the result over- and underflows
// the way exp should.
std::pair<llvm::Value *, llvm::Value *> exp2_integral(llvm::IRBuilder<> &b, llvm::Value *k) {
  llvm::Type *int_type = k->getType()->getWithNewType(b.getInt32Ty());
  llvm::Value *ki = b.CreateFPToSI(k, int_type);
  llvm::Value *half = b.CreateAShr(ki, llvm::ConstantInt::get(int_type, 1));
  llvm::Value *rest = b.CreateSub(ki, half);
  auto power = [&](llvm::Value *e) {
    llvm::Value *biased = b.CreateAdd(e, llvm::ConstantInt::get(int_type, 127));
    return b.CreateBitCast(b.CreateShl(biased, llvm::ConstantInt::get(int_type, 23)), k->getType());
  };
  return std::make_pair(power(half), power(rest));
}

}  // namespace

llvm::Value *emit_exp_f32(llvm::IRBuilder<> &b, llvm::Value *x) {
  // exp(x) = 2^k e^r with k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2]; ln 2
  // in two parts (the first exact in 9 bits) so that k ln 2 is subtracted exactly.
  // Below ln(FLT_MIN) the true value is a denormal; the result is 0 instead, and the
  // argument is clamped to just above that bound so that no step computes a denormal
  // either. Producing or reading one takes a microcode assist of ~100 cycles on x86
  // (unless the caller flushes them), and a masked softmax exponentiates a whole row of
  // hugely negative scores: BERT's softmax ran 7-9x slower inside the model than tuned
  // on unmasked inputs.
  const double smallest_normal_argument = -87.3365;  // ln(FLT_MIN) = -87.33654475...
  llvm::Value *xc =
      call(b, llvm::Intrinsic::minnum,
           {call(b, llvm::Intrinsic::maxnum, {x, constant(x, smallest_normal_argument)}), constant(x, 89.0)});
  llvm::Value *k = call(b, llvm::Intrinsic::floor, {mul_add(b, xc, constant(x, 1.4426950408889634), constant(x, 0.5))});
  llvm::Value *r = mul_add(b, k, constant(x, -0.693359375), xc);
  r = mul_add(b, k, constant(x, 2.12194440e-4), r);
  // e^r = 1 + r + r^2 P(r)
  llvm::Value *p = horner(b, r, {1.3926176124e-03, 8.3631730745e-03, 4.1666554662e-02, 1.6666577026e-01, 0.5});
  llvm::Value *er = mul_add(b, b.CreateFMul(r, r), p, b.CreateFAdd(r, constant(x, 1.0)));
  auto [scale_a, scale_b] = exp2_integral(b, k);
  llvm::Value *result = b.CreateFMul(b.CreateFMul(er, scale_a), scale_b);
  result = b.CreateSelect(b.CreateFCmpOLT(x, constant(x, smallest_normal_argument)), constant(x, 0.0), result);
  return propagate_nan(b, x, result);
}

llvm::Value *emit_erf_f32(llvm::IRBuilder<> &b, llvm::Value *x) {
  llvm::Value *a = call(b, llvm::Intrinsic::fabs, {x});
  // |x| <= 1: erf(x) = x P(x^2), relative accuracy down to the smallest x.
  llvm::Value *near_zero =
      b.CreateFMul(x, horner(b, b.CreateFMul(x, x),
                             {7.8758750468e-05, -8.0168642818e-04, 5.1890874228e-03, -2.6854212010e-02,
                              1.1283594715e-01, -3.7612626667e-01, 1.1283791658e+00}));
  // 1 < |x| <= 4: a Chebyshev series in t = (2|x| - 5) / 3.
  llvm::Value *ac = call(b, llvm::Intrinsic::minnum, {a, constant(x, 4.0)});
  llvm::Value *t = mul_add(b, ac, constant(x, 2.0 / 3.0), constant(x, -5.0 / 3.0));
  llvm::Value *tail =
      chebyshev(b, t,
                {9.6969747946e-01, 5.4251323896e-02, -3.8763756439e-02, 2.1797487804e-02, -9.3141747927e-03,
                 2.7481118337e-03, -3.5767518061e-04, -1.2686220708e-04, 8.8965358739e-05, -2.2288977858e-05,
                 7.0175617069e-08, 1.8175606307e-06, -5.8348746003e-07});
  // Exactly 1 where erf rounds to 1 (|x| > 3.92), as GELU's 1 + erf(x) must reach 0.
  tail = b.CreateSelect(b.CreateFCmpOGT(a, constant(x, 3.92)), constant(x, 1.0),
                        call(b, llvm::Intrinsic::minnum, {tail, constant(x, 1.0)}));
  tail = call(b, llvm::Intrinsic::copysign, {tail, x});
  llvm::Value *result = b.CreateSelect(b.CreateFCmpOLE(a, constant(x, 1.0)), near_zero, tail);
  return propagate_nan(b, x, result);
}

llvm::Value *emit_tanh_f32(llvm::IRBuilder<> &b, llvm::Value *x) {
  llvm::Value *a = call(b, llvm::Intrinsic::fabs, {x});
  // |x| < 0.55: tanh(x) = x P(x^2); beyond, 1 - 2 / (e^{2|x|} + 1) loses nothing to
  // cancellation. tanh(9) rounds to 1.
  llvm::Value *near_zero = b.CreateFMul(x, horner(b, b.CreateFMul(x, x),
                                                  {-6.2336335513e-03, 2.1038214854e-02, -5.3842319260e-02,
                                                   1.3332456537e-01, -3.3333310798e-01, 9.9999999905e-01}));
  llvm::Value *ac = call(b, llvm::Intrinsic::minnum, {a, constant(x, 9.0)});
  llvm::Value *e = emit_exp_f32(b, b.CreateFAdd(ac, ac));
  llvm::Value *tail = b.CreateFSub(constant(x, 1.0), b.CreateFDiv(constant(x, 2.0), b.CreateFAdd(e, constant(x, 1.0))));
  tail = call(b, llvm::Intrinsic::copysign, {tail, x});
  llvm::Value *result = b.CreateSelect(b.CreateFCmpOLT(a, constant(x, 0.55)), near_zero, tail);
  return propagate_nan(b, x, result);
}

}  // namespace kiln::codegen
