#include <gtest/gtest.h>

#include <random>

#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::ir {
namespace {

TEST(Simplify, FoldsAffineForms) {
  Var x("x"), y("y");
  EXPECT_EQ(to_string(simplify(x + y - x)), "y");
  EXPECT_EQ(to_string(simplify((x + 2) * 3 - x * 3)), "6");
  EXPECT_EQ(to_string(simplify(x * 4 + y + x * 2 + 1)), "(((x * 6) + y) + 1)");
}

TEST(Simplify, RemovesDivModOfSplitLoops) {
  Var o("o"), i("i");
  Analyzer a;
  a.bind(o, 10);
  a.bind(i, 16);
  EXPECT_EQ(to_string(a.simplify(make_floordiv(o * 16 + i, 8))), "(floordiv(i, 8) + (o * 2))");
  EXPECT_EQ(to_string(a.simplify(make_floormod(o * 16 + i, 16))), "i");
  EXPECT_EQ(to_string(a.simplify(make_floordiv(o * 16 + i, 16))), "o");
}

TEST(Simplify, UndoesSplitThenFuse) {
  Var f("f");
  Analyzer a;
  a.bind(f, 64);
  Expr rebuilt = make_floordiv(f, 4) * 4 + make_floormod(f, 4);
  EXPECT_EQ(to_string(a.simplify(rebuilt)), "f");
  Expr nested = make_floordiv(make_floordiv(f, 4), 2);
  EXPECT_EQ(to_string(a.simplify(nested)), "floordiv(f, 8)");
}

TEST(Simplify, DecidesPredicatesFromRanges) {
  Var o("o"), i("i");
  Analyzer a;
  a.bind(o, 4);
  a.bind(i, 4);
  EXPECT_TRUE(a.can_prove(o * 4 + i < 16));
  EXPECT_FALSE(a.can_prove(o * 4 + i < 15));
  EXPECT_EQ(to_string(a.simplify(o * 4 + i < 15)), "((i + (o * 4)) < 15)");
}

TEST(Simplify, SymbolicBoundsOfInnerLoops) {
  Var o("o"), i("i");
  Analyzer a;
  a.bind(o, 8);
  a.bind(i, 4);
  std::unordered_set<const VarNode *> relaxed{i.get()};
  Expr e = o * 4 + i + 1;
  EXPECT_EQ(to_string(a.symbolic_min(e, relaxed)), "((o * 4) + 1)");
  EXPECT_EQ(to_string(a.symbolic_max(e, relaxed)), "((o * 4) + 4)");
}

// Random affine/div/mod expressions: the simplified form evaluates equal everywhere.
TEST(Simplify, PreservesValueOnRandomExpressions) {
  std::mt19937_64 rng(7);
  Var x("x"), y("y");
  for (int trial = 0; trial < 300; ++trial) {
    std::function<Expr(int)> gen = [&](int depth) -> Expr {
      int pick = depth > 3 ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % 8);
      switch (pick) {
        case 0:
          return x;
        case 1:
          return y;
        case 2:
          return Expr(static_cast<int64_t>(rng() % 9));
        case 3:
          return gen(depth + 1) + gen(depth + 1);
        case 4:
          return gen(depth + 1) - gen(depth + 1);
        case 5:
          return gen(depth + 1) * Expr(static_cast<int64_t>(rng() % 5 + 1));
        case 6:
          return make_floordiv(gen(depth + 1), Expr(static_cast<int64_t>(rng() % 7 + 1)));
        default:
          return make_floormod(gen(depth + 1), Expr(static_cast<int64_t>(rng() % 7 + 1)));
      }
    };
    Expr e = gen(0);
    Analyzer a;
    a.bind(x, 12);
    a.bind(y, 5);
    Expr s = a.simplify(e);
    for (int64_t xv = 0; xv < 12; ++xv) {
      for (int64_t yv = 0; yv < 5; ++yv) {
        VarMap m{{x.get(), Expr(xv)}, {y.get(), Expr(yv)}};
        int64_t want = 0, got = 0;
        ASSERT_TRUE(as_const_int(simplify(substitute(e, m)), &want));
        ASSERT_TRUE(as_const_int(simplify(substitute(s, m)), &got));
        ASSERT_EQ(want, got) << "trial " << trial << ": " << to_string(e) << " simplified to " << to_string(s)
                             << " at x=" << xv << " y=" << yv;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::ir
