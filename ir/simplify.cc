#include "ir/simplify.h"

#include <algorithm>
#include <numeric>

#include "ir/functor.h"
#include "ir/structural.h"

namespace kiln::ir {
namespace {

constexpr int64_t kInf = Interval::kInf;

int64_t sat(__int128 v) {
  if (v >= kInf) return kInf;
  if (v <= -kInf) return -kInf;
  return static_cast<int64_t>(v);
}
int64_t sat_add(int64_t a, int64_t b) {
  if (a == kInf || b == kInf) return (a == -kInf || b == -kInf) ? 0 : kInf;
  if (a == -kInf || b == -kInf) return -kInf;
  return sat(static_cast<__int128>(a) + b);
}
int64_t sat_mul(int64_t a, int64_t c) {
  if (c == 0) return 0;
  if (a == kInf || a == -kInf) return (a > 0) == (c > 0) ? kInf : -kInf;
  return sat(static_cast<__int128>(a) * c);
}
int64_t fdiv(int64_t a, int64_t b) {
  if (a == kInf || a == -kInf) return a;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
Interval scale(Interval x, int64_t c) {
  int64_t a = sat_mul(x.min, c), b = sat_mul(x.max, c);
  return c >= 0 ? Interval{a, b} : Interval{b, a};
}
Interval add(Interval x, Interval y) { return Interval{sat_add(x.min, y.min), sat_add(x.max, y.max)}; }

// sum(coef * atom) + constant over integers.
struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;

  void add_term(const Expr &atom, int64_t coef) {
    if (coef == 0) return;
    for (auto &t : terms) {
      if (same_expr(t.first, atom)) {
        t.second += coef;
        return;
      }
    }
    terms.emplace_back(atom, coef);
  }
  void add(const Linear &o, int64_t scale_by) {
    for (const auto &t : o.terms) add_term(t.first, t.second * scale_by);
    constant += o.constant * scale_by;
  }
  void drop_zeros() {
    terms.erase(std::remove_if(terms.begin(), terms.end(), [](const auto &t) { return t.second == 0; }), terms.end());
  }
};

}  // namespace

// The rewriting engine; a class (not a free function) so Analyzer can befriend it.
class SimplifyPass : public IRMutator {
 public:
  explicit SimplifyPass(const Analyzer &a) : analyzer_(a) {}

  Interval bounds_of(const Expr &e) {
    if (const auto *imm = e.as<IntImmNode>()) return Interval{imm->value, imm->value};
    if (const auto *v = e.as<VarNode>()) {
      auto it = analyzer_.ranges_.find(v);
      return it == analyzer_.ranges_.end() ? Interval{} : it->second;
    }
    if (is_float(e.dtype())) return Interval{};
    if (e.dtype() == DType::kBool) return Interval{0, 1};
    switch (e.kind()) {
      case ExprKind::kAdd: {
        const auto *op = e.as<AddNode>();
        return add(bounds_of(op->a), bounds_of(op->b));
      }
      case ExprKind::kSub: {
        const auto *op = e.as<SubNode>();
        return add(bounds_of(op->a), scale(bounds_of(op->b), -1));
      }
      case ExprKind::kMul: {
        const auto *op = e.as<MulNode>();
        int64_t c;
        if (as_const_int(op->b, &c)) return scale(bounds_of(op->a), c);
        if (as_const_int(op->a, &c)) return scale(bounds_of(op->b), c);
        Interval x = bounds_of(op->a), y = bounds_of(op->b);
        if (!x.bounded() || !y.bounded()) return Interval{};
        int64_t p[] = {sat_mul(x.min, y.min), sat_mul(x.min, y.max), sat_mul(x.max, y.min), sat_mul(x.max, y.max)};
        return Interval{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      }
      case ExprKind::kFloorDiv: {
        const auto *op = e.as<FloorDivNode>();
        int64_t c;
        if (!as_const_int(op->b, &c) || c <= 0) return Interval{};
        Interval x = bounds_of(op->a);
        return Interval{fdiv(x.min, c), fdiv(x.max, c)};
      }
      case ExprKind::kFloorMod: {
        const auto *op = e.as<FloorModNode>();
        int64_t c;
        if (!as_const_int(op->b, &c) || c <= 0) return Interval{};
        Interval x = bounds_of(op->a);
        if (x.min >= 0 && x.max < c) return x;
        return Interval{0, c - 1};
      }
      case ExprKind::kMin: {
        const auto *op = e.as<MinNode>();
        Interval x = bounds_of(op->a), y = bounds_of(op->b);
        return Interval{std::min(x.min, y.min), std::min(x.max, y.max)};
      }
      case ExprKind::kMax: {
        const auto *op = e.as<MaxNode>();
        Interval x = bounds_of(op->a), y = bounds_of(op->b);
        return Interval{std::max(x.min, y.min), std::max(x.max, y.max)};
      }
      case ExprKind::kSelect: {
        const auto *op = e.as<SelectNode>();
        Interval x = bounds_of(op->true_value), y = bounds_of(op->false_value);
        return Interval{std::min(x.min, y.min), std::max(x.max, y.max)};
      }
      case ExprKind::kCast:
        return bounds_of(e.as<CastNode>()->value);
      default:
        return Interval{};
    }
  }

  Linear linearize(const Expr &e) {
    Linear lin;
    if (e.dtype() != DType::kInt64 && e.dtype() != DType::kInt32) {
      lin.add_term(e, 1);
      return lin;
    }
    if (const auto *imm = e.as<IntImmNode>()) {
      lin.constant = imm->value;
    } else if (const auto *op = e.as<AddNode>()) {
      lin = linearize(op->a);
      lin.add(linearize(op->b), 1);
    } else if (const auto *op = e.as<SubNode>()) {
      lin = linearize(op->a);
      lin.add(linearize(op->b), -1);
    } else if (const auto *op = e.as<MulNode>()) {
      Linear a = linearize(op->a), b = linearize(op->b);
      if (a.terms.empty()) {
        lin.add(b, a.constant);
      } else if (b.terms.empty()) {
        lin.add(a, b.constant);
      } else {
        lin.add_term(make_mul(to_expr(a, e.dtype()), to_expr(b, e.dtype())), 1);
      }
    } else {
      lin.add_term(e, 1);
    }
    lin.drop_zeros();
    merge_div_mod_pairs(&lin);
    return lin;
  }

  // floordiv(x, c)*c*k + floormod(x, c)*k == x*k: undoes split-then-fuse index math.
  void merge_div_mod_pairs(Linear *lin) {
    for (size_t i = 0; i < lin->terms.size(); ++i) {
      const auto *mod = lin->terms[i].first.as<FloorModNode>();
      int64_t c;
      if (!mod || !as_const_int(mod->b, &c) || lin->terms[i].second == 0) continue;
      int64_t k = lin->terms[i].second;
      for (size_t j = 0; j < lin->terms.size(); ++j) {
        const auto *div = lin->terms[j].first.as<FloorDivNode>();
        int64_t c2;
        if (!div || !as_const_int(div->b, &c2) || c2 != c || lin->terms[j].second != k * c) continue;
        if (!same_expr(div->a, mod->a)) continue;
        Expr x = div->a;
        lin->terms[i].second = 0;
        lin->terms[j].second = 0;
        Linear inner = linearize(x);
        lin->drop_zeros();
        lin->add(inner, k);
        lin->drop_zeros();
        merge_div_mod_pairs(lin);
        return;
      }
    }
  }

  // Terms are ordered by their printed form, so equal sums print (and hash) alike. The
  // keys are printed once per term, not once per comparison: this sort is a large share
  // of replaying a schedule.
  static void sort_terms(Linear &lin) {
    if (lin.terms.size() < 2) return;
    std::vector<std::pair<std::string, size_t>> keys;
    keys.reserve(lin.terms.size());
    for (size_t i = 0; i < lin.terms.size(); ++i) keys.emplace_back(to_string(lin.terms[i].first), i);
    std::stable_sort(keys.begin(), keys.end(), [](const auto &x, const auto &y) { return x.first < y.first; });
    std::vector<std::pair<Expr, int64_t>> sorted;
    sorted.reserve(lin.terms.size());
    for (const auto &key : keys) sorted.push_back(std::move(lin.terms[key.second]));
    lin.terms = std::move(sorted);
  }

  Expr to_expr(Linear lin, DType t) {
    lin.drop_zeros();
    sort_terms(lin);
    Expr result;
    for (const auto &[atom, coef] : lin.terms) {
      if (!result.defined()) {
        result = coef == 1 ? atom : make_mul(atom, make_int(coef, t));
      } else if (coef > 0) {
        result = make_add(result, coef == 1 ? atom : make_mul(atom, make_int(coef, t)));
      } else {
        result = make_sub(result, coef == -1 ? atom : make_mul(atom, make_int(-coef, t)));
      }
    }
    if (!result.defined()) return make_int(lin.constant, t);
    if (lin.constant > 0) return make_add(result, make_int(lin.constant, t));
    if (lin.constant < 0) return make_sub(result, make_int(-lin.constant, t));
    return result;
  }

  Interval bounds_of(const Linear &lin) {
    Interval r{lin.constant, lin.constant};
    for (const auto &[atom, coef] : lin.terms) r = add(r, scale(bounds_of(atom), coef));
    return r;
  }

  Expr simplify_div_mod(const Expr &num, int64_t c, bool is_mod, DType t) {
    Linear lin = linearize(num);
    Linear quotient, rest;
    for (const auto &[atom, coef] : lin.terms) {
      if (coef % c == 0) {
        quotient.add_term(atom, coef / c);
      } else {
        rest.add_term(atom, coef);
      }
    }
    quotient.constant = fdiv(lin.constant, c);
    rest.constant = lin.constant - quotient.constant * c;
    // Nested division: floordiv(floordiv(x, a), b) == floordiv(x, a*b).
    if (!is_mod && rest.terms.size() == 1 && rest.constant == 0 && rest.terms[0].second == 1) {
      if (const auto *inner = rest.terms[0].first.as<FloorDivNode>()) {
        int64_t a;
        if (as_const_int(inner->b, &a) && a > 0) {
          Linear q = quotient;
          q.add_term(simplify_div_mod(inner->a, a * c, false, t), 1);
          return to_expr(q, t);
        }
      }
    }
    if (is_mod && rest.terms.size() == 1 && rest.constant == 0 && rest.terms[0].second == 1) {
      if (const auto *inner = rest.terms[0].first.as<FloorModNode>()) {
        int64_t a;
        if (as_const_int(inner->b, &a) && a > 0 && a % c == 0) return simplify_div_mod(inner->a, c, true, t);
      }
    }
    Interval r = bounds_of(rest);
    if (r.bounded() && fdiv(r.min, c) == fdiv(r.max, c)) {
      int64_t q = fdiv(r.min, c);
      if (is_mod) {
        rest.constant -= q * c;
        return to_expr(rest, t);
      }
      quotient.constant += q;
      return to_expr(quotient, t);
    }
    if (is_mod) return make_floormod(to_expr(rest, t), make_int(c, t));
    quotient.add_term(make_floordiv(to_expr(rest, t), make_int(c, t)), 1);
    return to_expr(quotient, t);
  }

  Expr canonical(const Expr &e) { return to_expr(linearize(e), e.dtype()); }

 protected:
  // A variable whose range is a single value (an extent-1 loop) is that value.
  Expr visit(const VarNode *op, const Expr &self) override {
    auto it = analyzer_.ranges_.find(op);
    if (it != analyzer_.ranges_.end() && it->second.min == it->second.max && !analyzer_.opaque_.count(op))
      return make_int(it->second.min, op->dtype);
    return self;
  }
  Expr visit(const AddNode *op, const Expr &self) override { return arith(self, ExprKind::kAdd, op->a, op->b); }
  Expr visit(const SubNode *op, const Expr &self) override { return arith(self, ExprKind::kSub, op->a, op->b); }
  Expr visit(const MulNode *op, const Expr &self) override { return arith(self, ExprKind::kMul, op->a, op->b); }

  // Float arithmetic is never reassociated: only its index subexpressions change. An
  // unchanged float subtree is kept as it is (simplifying a deep element-wise chain
  // then allocates nothing).
  Expr arith(const Expr &self, ExprKind kind, const Expr &a0, const Expr &b0) {
    Expr a = mutate(a0), b = mutate(b0);
    if (is_float(self.dtype()) || self.dtype() == DType::kBool) {
      if (a.same_as(a0) && b.same_as(b0)) return self;
      return make_binary(kind, std::move(a), std::move(b));
    }
    return canonical(make_binary(kind, std::move(a), std::move(b)));
  }

  Expr visit(const FloorDivNode *op, const Expr &) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    int64_t c;
    if (as_const_int(b, &c) && c > 0) return simplify_div_mod(a, c, false, op->dtype);
    return make_floordiv(a, b);
  }
  Expr visit(const FloorModNode *op, const Expr &) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    int64_t c;
    if (as_const_int(b, &c) && c > 0) return simplify_div_mod(a, c, true, op->dtype);
    return make_floormod(a, b);
  }
  Expr visit(const MinNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (!is_float(op->dtype)) {
      Interval d = bounds_of(canonical(make_sub(a, b)));
      if (d.max <= 0) return a;
      if (d.min >= 0) return b;
    } else if (a.same_as(op->a) && b.same_as(op->b)) {
      return self;
    }
    return make_min(a, b);
  }
  Expr visit(const MaxNode *op, const Expr &self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (!is_float(op->dtype)) {
      Interval d = bounds_of(canonical(make_sub(a, b)));
      if (d.min >= 0) return a;
      if (d.max <= 0) return b;
    } else if (a.same_as(op->a) && b.same_as(op->b)) {
      return self;
    }
    return make_max(a, b);
  }
  Expr compare(const Expr &, ExprKind kind, const Expr &a0, const Expr &b0) {
    Expr a = mutate(a0), b = mutate(b0);
    if (is_float(a.dtype())) return make_cmp(kind, a, b);
    Expr diff = canonical(make_sub(a, b));
    Interval d = bounds_of(diff);
    auto yes = make_int(1, DType::kBool), no = make_int(0, DType::kBool);
    switch (kind) {
      case ExprKind::kLT:
        if (d.max < 0) return yes;
        if (d.min >= 0) return no;
        break;
      case ExprKind::kLE:
        if (d.max <= 0) return yes;
        if (d.min > 0) return no;
        break;
      case ExprKind::kGT:
        if (d.min > 0) return yes;
        if (d.max <= 0) return no;
        break;
      case ExprKind::kGE:
        if (d.min >= 0) return yes;
        if (d.max < 0) return no;
        break;
      case ExprKind::kEQ:
        if (d.min == 0 && d.max == 0) return yes;
        if (d.min > 0 || d.max < 0) return no;
        break;
      case ExprKind::kNE:
        if (d.min == 0 && d.max == 0) return no;
        if (d.min > 0 || d.max < 0) return yes;
        break;
      default:
        break;
    }
    return make_cmp(kind, a, b);
  }
  Expr visit(const LTNode *op, const Expr &self) override { return compare(self, ExprKind::kLT, op->a, op->b); }
  Expr visit(const LENode *op, const Expr &self) override { return compare(self, ExprKind::kLE, op->a, op->b); }
  Expr visit(const GTNode *op, const Expr &self) override { return compare(self, ExprKind::kGT, op->a, op->b); }
  Expr visit(const GENode *op, const Expr &self) override { return compare(self, ExprKind::kGE, op->a, op->b); }
  Expr visit(const EQNode *op, const Expr &self) override { return compare(self, ExprKind::kEQ, op->a, op->b); }
  Expr visit(const NENode *op, const Expr &self) override { return compare(self, ExprKind::kNE, op->a, op->b); }
  Expr visit(const AndNode *op, const Expr &) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_const_int(a, 0) || is_const_int(b, 0)) return make_int(0, DType::kBool);
    return make_and(a, b);
  }
  Expr visit(const OrNode *op, const Expr &) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (is_const_int(a, 1) || is_const_int(b, 1)) return make_int(1, DType::kBool);
    if (is_const_int(a, 0)) return b;
    if (is_const_int(b, 0)) return a;
    return make_or(a, b);
  }
  Expr visit(const NotNode *op, const Expr &) override {
    Expr a = mutate(op->a);
    int64_t v;
    if (as_const_int(a, &v)) return make_int(!v, DType::kBool);
    return make_not(a);
  }
  Expr visit(const SelectNode *op, const Expr &) override {
    Expr c = mutate(op->cond);
    int64_t v;
    if (as_const_int(c, &v)) return mutate(v ? op->true_value : op->false_value);
    return make_select(c, mutate(op->true_value), mutate(op->false_value));
  }

 private:
  const Analyzer &analyzer_;
};

namespace {

// Bounds over the relaxed variables, keeping the others symbolic.
class SymbolicBound {
 public:
  SymbolicBound(const Analyzer &a, SimplifyPass &pass, const std::unordered_set<const VarNode *> &relaxed)
      : analyzer_(a), pass_(pass), relaxed_(relaxed) {}

  bool involves_relaxed(const Expr &e) const {
    bool found = false;
    for_each_subexpr(e, [&](const Expr &x) {
      if (const auto *v = x.as<VarNode>(); v && relaxed_.count(v)) found = true;
    });
    return found;
  }

  // upper = true: an expression >= e for all relaxed values; false: <= e.
  Expr bound(const Expr &e, bool upper) {
    if (!involves_relaxed(e)) return e;
    if (const auto *v = e.as<VarNode>()) {
      Interval r = analyzer_.bounds(e);
      int64_t b = upper ? r.max : r.min;
      if (b == kInf || b == -kInf) throw IRError("cannot bound variable '" + v->name + "'");
      return make_int(b);
    }
    if (const auto *op = e.as<AddNode>()) return make_add(bound(op->a, upper), bound(op->b, upper));
    if (const auto *op = e.as<SubNode>()) return make_sub(bound(op->a, upper), bound(op->b, !upper));
    if (const auto *op = e.as<MulNode>()) {
      int64_t c;
      if (as_const_int(op->b, &c)) return make_mul(bound(op->a, c >= 0 ? upper : !upper), op->b);
      if (as_const_int(op->a, &c)) return make_mul(op->a, bound(op->b, c >= 0 ? upper : !upper));
    }
    if (const auto *op = e.as<FloorDivNode>()) {
      int64_t c;
      if (as_const_int(op->b, &c) && c > 0) return make_floordiv(bound(op->a, upper), op->b);
    }
    if (const auto *op = e.as<FloorModNode>()) {
      int64_t c;
      if (as_const_int(op->b, &c) && c > 0) return make_int(upper ? c - 1 : 0);
    }
    if (const auto *op = e.as<MinNode>()) return make_min(bound(op->a, upper), bound(op->b, upper));
    if (const auto *op = e.as<MaxNode>()) return make_max(bound(op->a, upper), bound(op->b, upper));
    Interval r = analyzer_.bounds(e);
    int64_t b = upper ? r.max : r.min;
    if (b == kInf || b == -kInf) throw IRError("cannot bound " + to_string(e));
    return make_int(b);
  }

 private:
  const Analyzer &analyzer_;
  SimplifyPass &pass_;
  const std::unordered_set<const VarNode *> &relaxed_;
};

}  // namespace

Expr Analyzer::simplify(const Expr &e) const {
  if (!e.defined()) return e;
  SimplifyPass pass(*this);
  Expr r = pass.mutate(e);
  // A second round catches terms that became combinable after the first.
  return pass.mutate(r);
}

uint64_t Analyzer::state_hash() const {
  // Order-independent: a sum of mixed entries.
  auto mix = [](uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
  };
  uint64_t h = 0;
  for (const auto &[v, r] : ranges_) {
    auto p = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v));
    h += mix(p ^ mix(static_cast<uint64_t>(r.min) ^ mix(static_cast<uint64_t>(r.max) + (opaque_.count(v) ? 1 : 0))));
  }
  return h;
}

Interval Analyzer::bounds(const Expr &e) const {
  SimplifyPass pass(*this);
  return pass.bounds_of(pass.mutate(e));
}

bool Analyzer::can_prove(const Expr &cond) const { return is_const_int(simplify(cond), 1); }

Expr Analyzer::symbolic_min(const Expr &e, const std::unordered_set<const VarNode *> &relaxed) const {
  SimplifyPass pass(*this);
  SymbolicBound b(*this, pass, relaxed);
  return simplify(b.bound(simplify(e), false));
}

Expr Analyzer::symbolic_max(const Expr &e, const std::unordered_set<const VarNode *> &relaxed) const {
  SimplifyPass pass(*this);
  SymbolicBound b(*this, pass, relaxed);
  return simplify(b.bound(simplify(e), true));
}

Expr simplify(const Expr &e) { return Analyzer().simplify(e); }

}  // namespace kiln::ir
