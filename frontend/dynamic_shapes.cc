#include "frontend/dynamic_shapes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "ops/registry.h"
#include "support/file_read.h"
#include "support/json_read.h"
#include "support/pieces.h"

namespace kiln::frontend {

namespace {

int64_t parse_count(const std::string &text, const std::string &what) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw std::invalid_argument(what + ": '" + text + "' is not a positive integer");
  // Digits beyond what int64 holds are a value above every supported one, not a typo.
  if (text.size() > 12)
    throw std::invalid_argument(what + ": '" + text + "' is above 1048576, the largest value supported");
  int64_t v = std::stoll(text);
  if (v < 1) throw std::invalid_argument(what + ": '" + text + "' is not a positive integer");
  return v;
}

std::map<int64_t, double> read_weights(const std::string &source, const std::string &what) {
  std::map<int64_t, double> weights;
  bool inline_list = !source.empty() && std::all_of(source.begin(), source.end(),
                                                    [](char c) { return (c >= '0' && c <= '9') || c == ','; });
  if (inline_list) {
    std::stringstream ss(source);
    std::string part;
    while (std::getline(ss, part, ',')) weights[parse_count(part, what)] += 1.0;
    return weights;
  }
  if (!std::filesystem::exists(source))
    throw std::invalid_argument(what + ": '" + source +
                                "' is neither a list of values (8,16,128) nor an existing JSON file");
  nlohmann::json j = kiln::support::read_json_file(source, what + ": the weights file");
  if (j.is_array()) {
    for (const nlohmann::json &v : j) {
      if (!v.is_number_integer() || v.get<int64_t>() < 1)
        throw std::invalid_argument(what + ": " + source + " must list positive integers, found " +
                                    kiln::support::json_excerpt(v));
      weights[v.get<int64_t>()] += 1.0;
    }
  } else if (j.is_object()) {
    for (const auto &[key, w] : j.items()) {
      if (!w.is_number() || w.get<double>() < 0)
        throw std::invalid_argument(what + ": " + source + " maps '" + key + "' to " + kiln::support::json_excerpt(w) +
                                    "; weights are non-negative numbers");
      weights[parse_count(key, what + " (" + source + ")")] += w.get<double>();
    }
  } else {
    throw std::invalid_argument(what + ": " + source +
                                " must hold a list of values or an object of value: weight pairs");
  }
  return weights;
}

std::string value_description(const Graph &g, ValueId v) {
  const Value &value = g.values[static_cast<size_t>(v)];
  std::string text = "tensor '" + value.name + "'";
  if (std::optional<size_t> p = g.producer(v)) {
    const Node &n = g.nodes[*p];
    text += " (" + n.op + (n.source.empty() ? "" : " of model node '" + n.source + "'") + ")";
  }
  return text;
}

std::string node_description(const Node &n) {
  return n.op + (n.source.empty() ? "" : " (model node '" + n.source + "')");
}

// The graphs have the same nodes, reading the same values, and the same value kinds.
void require_same_structure(const Graph &reference, const Graph &other, const std::string &when) {
  auto differs = [&](const std::string &what) {
    throw DynamicShapeError("the model's graph changes with its dimensions' values (" + what + " differs " + when +
                            "): Kiln compiles dynamic dimensions only where the operators do not depend on their "
                            "values; fix the dimension instead (--dim NAME=VALUE)");
  };
  if (reference.values.size() != other.values.size() || reference.nodes.size() != other.nodes.size())
    differs("the number of operators");
  if (reference.inputs != other.inputs || reference.outputs != other.outputs) differs("the inputs or outputs");
  for (size_t i = 0; i < reference.nodes.size(); ++i) {
    const Node &a = reference.nodes[i], &b = other.nodes[i];
    if (a.op != b.op || a.inputs != b.inputs || a.output != b.output) differs("operator " + node_description(a));
  }
  for (size_t v = 0; v < reference.values.size(); ++v) {
    const Value &a = reference.values[v], &b = other.values[v];
    if (a.is_constant() != b.is_constant() || a.type.dtype != b.type.dtype ||
        a.type.shape.size() != b.type.shape.size())
      differs(value_description(reference, static_cast<ValueId>(v)));
  }
}

bool same_bytes(const ir::HostTensor &a, const ir::HostTensor &b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size() * ir::dtype_bytes(a.dtype()))) == 0;
}

// Whether `small` holds `large`'s leading elements along every axis.
bool is_leading_part(const ir::HostTensor &small, const ir::HostTensor &large) {
  const std::vector<int64_t> &s = small.shape(), &l = large.shape();
  if (s.size() != l.size() || small.dtype() != large.dtype()) return false;
  std::vector<int64_t> index(s.size(), 0);
  for (int64_t flat = 0; flat < small.size(); ++flat) {
    int64_t rest = flat, offset = 0, stride = 1;
    for (size_t a = s.size(); a-- > 0;) {
      index[a] = rest % s[a];
      rest /= s[a];
    }
    for (size_t a = s.size(); a-- > 0;) {
      offset += index[a] * stride;
      stride *= l[a];
    }
    if (small.get(flat) != large.get(offset) && !(std::isnan(small.get(flat)) && std::isnan(large.get(offset))))
      return false;
  }
  return true;
}

bool has_symbolic_axis(const std::vector<SymbolicAxis> &axes) {
  return std::any_of(axes.begin(), axes.end(), [](const SymbolicAxis &a) { return a.is_symbolic(); });
}

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

size_t normalize_axis(int64_t axis, size_t rank) {
  return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

// What an operator needs so that padding along dynamic axes does not change its result.
struct Mask {
  size_t input = 0;  // which operand
  size_t axis = 0;   // its axis
  double fill = 0;   // the reduction's identity
};

struct NodePlan {
  std::vector<Mask> masks;
  std::vector<size_t> mean_axes;  // reduce_mean over these symbolic input axes: rescale the result
};

// The rules: which operators may see padded elements, and what each one needs.
class BucketRules {
 public:
  BucketRules(const Graph &g, const SymbolicGraph &s) : g_(g), s_(s) {}

  NodePlan plan(const Node &n) const {
    NodePlan plan;
    bool symbolic = has_symbolic_axis(axes(n.output));
    for (ValueId in : n.inputs) symbolic = symbolic || has_symbolic_axis(axes(in));
    if (!symbolic) return plan;
    const ops::OpDef *def = ops::find_op(n.op);
    if (def && def->pattern == ops::OpPattern::kElementwise) return plan;
    if (n.op == "transpose") return plan;
    if (n.op == "reshape" || n.op == "flatten") {
      check_reshape(n);
      return plan;
    }
    if (n.op == "dense" || n.op == "matmul" || n.op == "batch_matmul") return plan_product(n);
    if (n.op == "softmax") {
      size_t axis = normalize_axis(n.attrs.value("axis", int64_t{-1}), rank(n.inputs[0]));
      if (symbolic_axis(n.inputs[0], axis)) plan.masks.push_back({0, axis, lowest()});
      return plan;
    }
    if (n.op == "reduce_sum" || n.op == "reduce_mean" || n.op == "reduce_max" || n.op == "reduce_min") {
      std::vector<int64_t> listed = n.attrs.value("axes", std::vector<int64_t>{});
      std::vector<size_t> reduced;
      for (int64_t a : listed) reduced.push_back(normalize_axis(a, rank(n.inputs[0])));
      if (listed.empty())
        for (size_t a = 0; a < rank(n.inputs[0]); ++a) reduced.push_back(a);
      double identity = n.op == "reduce_max" ? lowest() : n.op == "reduce_min" ? -lowest() : 0.0;
      for (size_t a : reduced)
        if (symbolic_axis(n.inputs[0], a)) {
          plan.masks.push_back({0, a, identity});
          if (n.op == "reduce_mean") plan.mean_axes.push_back(a);
        }
      return plan;
    }
    if (n.op == "layer_norm") {
      size_t axis = normalize_axis(n.attrs.value("axis", int64_t{-1}), rank(n.inputs[0]));
      for (size_t a = axis; a < rank(n.inputs[0]); ++a)
        if (symbolic_axis(n.inputs[0], a)) refuse(n, "normalizes over the dynamic dimension " + dim_of(n.inputs[0], a));
      return plan;
    }
    if (n.op == "concat") {
      size_t axis = normalize_axis(n.attrs.value("axis", int64_t{0}), rank(n.output));
      if (symbolic_axis(n.output, axis))
        refuse(n, "concatenates along the dynamic dimension " + dim_of(n.output, axis));
      return plan;
    }
    if (n.op == "slice") {
      check_slice(n);
      return plan;
    }
    if (n.op == "take") {
      size_t axis = normalize_axis(n.attrs.value("axis", int64_t{0}), rank(n.inputs[0]));
      if (symbolic_axis(n.inputs[0], axis))
        refuse(n, "gathers along the dynamic dimension " + dim_of(n.inputs[0], axis));
      return plan;
    }
    if (n.op == "conv2d" || n.op == "max_pool2d" || n.op == "avg_pool2d" || n.op == "global_avg_pool2d" ||
        n.op == "resize") {
      // The batch axis is independent; spatial and channel axes are windows or weights.
      for (size_t a = 1; a < rank(n.inputs[0]); ++a)
        if (symbolic_axis(n.inputs[0], a))
          refuse(n, "reads a window or all channels along the dynamic dimension " + dim_of(n.inputs[0], a) +
                        " (only a dynamic batch axis is supported for images so far)");
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (has_symbolic_axis(axes(n.inputs[i]))) refuse(n, "has weights that depend on a dynamic dimension");
      return plan;
    }
    refuse(n, "is not supported over a dynamic dimension yet");
    return plan;
  }

 private:
  // -inf, not the lowest float: a real element may itself be the lowest float (a fully
  // masked attention row), and padding must not tie with it.
  static double lowest() { return -std::numeric_limits<double>::infinity(); }

  const std::vector<SymbolicAxis> &axes(ValueId v) const { return s_.axes[static_cast<size_t>(v)]; }
  size_t rank(ValueId v) const { return g_.values[static_cast<size_t>(v)].type.shape.size(); }
  const std::vector<int64_t> &shape(ValueId v) const { return g_.values[static_cast<size_t>(v)].type.shape; }
  bool symbolic_axis(ValueId v, size_t axis) const { return axis < rank(v) && axes(v)[axis].is_symbolic(); }
  std::string dim_of(ValueId v, size_t axis) const {
    return "'" + s_.symbols[static_cast<size_t>(axes(v)[axis].symbol)].name + "'";
  }

  [[noreturn]] void refuse(const Node &n, const std::string &why) const {
    throw DynamicShapeError(node_description(n) + " " + why +
                            ": Kiln cannot run it for every value in the range; fix that dimension with --dim "
                            "NAME=VALUE, or compile one model per value");
  }

  NodePlan plan_product(const Node &n) const {
    NodePlan plan;
    ValueId a = n.inputs[0], b = n.inputs[1];
    size_t ka = 1, kb = 1;  // dense: x [M,K], weight [N,K]
    if (n.op != "dense") {
      bool ta = n.attrs.value("transpose_a", false), tb = n.attrs.value("transpose_b", false);
      size_t r = rank(a);
      ka = ta ? r - 2 : r - 1;
      kb = tb ? rank(b) - 1 : rank(b) - 2;
    }
    if (symbolic_axis(a, ka) || symbolic_axis(b, kb)) {
      // Both sides: a padded element may be anything, and 0 * inf is not 0.
      plan.masks.push_back({0, ka, 0.0});
      plan.masks.push_back({1, kb, 0.0});
    }
    return plan;
  }

  // Row-major order is kept by a reshape, so a padded axis stays a padded axis when
  // the elements outside it (before it in row-major order) are the same in number and
  // it is not merged with another padded axis (there are as many padded axes after as
  // before); merged with static axes inside it, its leading part is still the real one.
  void check_reshape(const Node &n) const {
    ValueId in = n.inputs[0], out = n.output;
    size_t found = 0;
    for (size_t a = 0; a < rank(in); ++a) {
      if (!symbolic_axis(in, a)) continue;
      int64_t outer = product(shape(in), 0, a);
      bool kept = false;
      for (size_t b = 0; b < rank(out); ++b)
        if (symbolic_axis(out, b) && axes(out)[b].symbol == axes(in)[a].symbol && product(shape(out), 0, b) == outer)
          kept = true;
      if (!kept)
        refuse(n, "moves the dynamic dimension " + dim_of(in, a) +
                      " across other axes (it must stay outermost among the axes it is merged with)");
      ++found;
    }
    size_t out_symbolic = 0;
    for (size_t b = 0; b < rank(out); ++b) out_symbolic += symbolic_axis(out, b);
    if (out_symbolic != found) refuse(n, "merges dynamic dimensions with each other");
  }

  void check_slice(const Node &n) const {
    ValueId in = n.inputs[0], out = n.output;
    std::vector<int64_t> begin = n.attrs.value("begin", std::vector<int64_t>{});
    std::vector<int64_t> step = n.attrs.value("step", std::vector<int64_t>{});
    std::vector<int64_t> extent = n.attrs.value("shape", std::vector<int64_t>{});
    for (size_t a = 0; a < rank(in); ++a) {
      if (!symbolic_axis(in, a)) continue;
      int64_t b0 = a < begin.size() ? begin[a] : 0, st = a < step.size() ? step[a] : 1;
      int64_t len = a < extent.size() ? extent[a] : shape(in)[a];
      const SymbolicAxis &sa = axes(in)[a];
      if (a < rank(out) && symbolic_axis(out, a)) {
        if (b0 == 0 && st == 1 && axes(out)[a] == sa) continue;  // the leading part: still padded
      } else if (st > 0) {
        int64_t smallest = sa.scale * s_.symbols[static_cast<size_t>(sa.symbol)].min;
        if (b0 + (len - 1) * st < smallest) continue;  // reads only elements every value has
      }
      refuse(n, "takes elements along the dynamic dimension " + dim_of(in, a) +
                    " that are not its leading part or beyond the smallest value");
    }
  }

  const Graph &g_;
  const SymbolicGraph &s_;
};

double total_weight(const DimRange &r) {
  double total = 0;
  for (const auto &[v, w] : r.weights) total += w;
  return total;
}

// DimRange::probability with the weights' total given (summed once for a whole range).
double probability_of(const DimRange &r, int64_t value, double total) {
  if (value < r.min || value > r.max) return 0;
  if (r.weights.empty()) return 1.0 / static_cast<double>(r.max - r.min + 1);
  auto it = r.weights.find(value);
  return it == r.weights.end() || total <= 0 ? 0 : it->second / total;
}

}  // namespace

double DimRange::probability(int64_t value) const { return probability_of(*this, value, total_weight(*this)); }

DimRange parse_dim_range(const std::string &spec) {
  const std::string what = "--dim '" + spec + "'";
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw std::invalid_argument(what + " must look like NAME=VALUE or NAME=MIN..MAX, e.g. seq=1..128");
  DimRange r;
  r.name = spec.substr(0, eq);
  std::string rest = spec.substr(eq + 1);
  size_t at = rest.find('@');
  std::string samples;
  if (at != std::string::npos) {
    samples = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  size_t dots = rest.find("..");
  if (dots == std::string::npos) {
    r.min = r.max = parse_count(rest, what);
  } else {
    r.min = parse_count(rest.substr(0, dots), what);
    r.max = parse_count(rest.substr(dots + 2), what);
    if (r.min > r.max) throw std::invalid_argument(what + ": the range's minimum is above its maximum");
  }
  if (r.max > (int64_t{1} << 20)) throw std::invalid_argument(what + ": values above 1048576 are not supported");
  if (at != std::string::npos && samples.empty())
    throw std::invalid_argument(what + ": nothing after '@': give the expected values (" + r.name +
                                "=1..128@8,16,128) or a JSON file of value: weight pairs, or drop the '@'");
  if (!samples.empty()) {
    if (r.is_fixed()) throw std::invalid_argument(what + ": expected values (@...) belong to a range");
    r.weights = read_weights(samples, what);
    for (const auto &[v, w] : r.weights)
      if (v < r.min || v > r.max)
        throw std::invalid_argument(what + ": the expected value " + std::to_string(v) + " is outside " +
                                    std::to_string(r.min) + ".." + std::to_string(r.max));
    double total = 0;
    for (const auto &[v, w] : r.weights) total += w;
    if (total <= 0) throw std::invalid_argument(what + ": the expected values' weights add up to 0");
    // Shares are weight / total: an infinite total would make every share 0 or NaN.
    if (!std::isfinite(total))
      throw std::invalid_argument(what +
                                  ": the expected values' weights add up to more than a double holds; "
                                  "scale them down (they are relative)");
  }
  return r;
}

std::vector<int64_t> choose_buckets(const DimRange &range, int count) {
  if (range.is_fixed() || count <= 1) return {range.max};
  // Small values each; larger ones on a grid that tiles well, finer for small ranges.
  int64_t grid = 1;
  while (grid < 8 && grid * 32 <= range.max) grid *= 2;
  while (range.max / grid > 256) grid *= 2;  // a long range: the search stays ~256² per bucket
  std::vector<int64_t> candidates;
  for (int64_t v = range.min; v < range.max; ++v)
    if (v <= 8 || v % grid == 0) candidates.push_back(v);
  candidates.push_back(range.max);
  const size_t m = candidates.size();
  // cost(i, j): the expected padding of the values in (candidates[i], candidates[j]] run
  // at candidates[j] (i = m: from the range's minimum).
  const double total = total_weight(range);
  std::vector<double> prefix_weighted(static_cast<size_t>(range.max - range.min + 2), 0.0);
  for (int64_t v = range.min; v <= range.max; ++v)
    prefix_weighted[static_cast<size_t>(v - range.min + 1)] =
        prefix_weighted[static_cast<size_t>(v - range.min)] + probability_of(range, v, total) / static_cast<double>(v);
  auto cost = [&](int64_t low_exclusive, int64_t bucket) {
    size_t lo = static_cast<size_t>(std::max(low_exclusive + 1, range.min) - range.min);
    size_t hi = static_cast<size_t>(bucket - range.min + 1);
    return static_cast<double>(bucket) * (prefix_weighted[hi] - prefix_weighted[lo]);
  };
  // best[k][j]: the least cost covering [min, candidates[j]] with k + 1 buckets, the last at j.
  const size_t k_max = std::min(static_cast<size_t>(count), m);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(k_max, std::vector<double>(m, inf));
  std::vector<std::vector<size_t>> from(k_max, std::vector<size_t>(m, m));
  for (size_t j = 0; j < m; ++j) best[0][j] = cost(range.min - 1, candidates[j]);
  for (size_t k = 1; k < k_max; ++k)
    for (size_t j = 0; j < m; ++j)
      for (size_t i = 0; i < j; ++i) {
        double c = best[k - 1][i] + cost(candidates[i], candidates[j]);
        if (c < best[k][j]) best[k][j] = c, from[k][j] = i;
      }
  size_t k_best = 0;
  for (size_t k = 0; k < k_max; ++k)
    if (best[k][m - 1] < best[k_best][m - 1] - 1e-12) k_best = k;
  std::vector<int64_t> buckets;
  for (size_t k = k_best + 1, j = m - 1; k-- > 0;) {
    buckets.push_back(candidates[j]);
    j = from[k][j];
  }
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

std::vector<double> bucket_probabilities(const DimRange &range, const std::vector<int64_t> &buckets) {
  const double total = total_weight(range);
  std::vector<double> mass;
  int64_t below = range.min - 1;
  for (int64_t b : buckets) {
    double sum = 0;
    for (int64_t v = below + 1; v <= b; ++v) sum += probability_of(range, v, total);
    mass.push_back(sum);
    below = b;
  }
  return mass;
}

std::string dim_input_name(const std::string &symbol) { return "kiln.dim." + symbol; }

SymbolicGraph find_symbolic_axes(const ImportAt &import_at_values, const std::vector<DimRange> &symbols) {
  // A model that does not import at some value says which values it was imported at:
  // the node alone does not tell the user which dimension to narrow or fix.
  auto import_at = [&](const std::vector<int64_t> &values) {
    try {
      return import_at_values(values);
    } catch (const DynamicShapeError &) {
      throw;
    } catch (const std::exception &e) {
      std::string at;
      for (size_t s = 0; s < symbols.size(); ++s)
        at += (at.empty() ? "'" : ", '") + symbols[s].name + "' = " + std::to_string(values[s]);
      // One dimension: the largest value the model takes, by bisection (a model whose
      // position table holds 512 rows takes a sequence up to 512), so the message can
      // give the range that works.
      std::string advice =
          "narrow the range (--dim NAME=MIN..MAX) to values the model takes, or fix the dimension "
          "(--dim NAME=VALUE)";
      if (symbols.size() == 1 && values[0] > symbols[0].min) {
        auto imports = [&](int64_t v) {
          try {
            import_at_values({v});
            return true;
          } catch (const std::exception &) {
            return false;
          }
        };
        int64_t good = symbols[0].min, bad = values[0];
        if (imports(good)) {
          while (bad - good > 1) {
            int64_t middle = good + (bad - good) / 2;
            (imports(middle) ? good : bad) = middle;
          }
          advice = "it imports at '" + symbols[0].name + "' up to " + std::to_string(good) + ": give --dim " +
                   symbols[0].name + "=" + std::to_string(symbols[0].min) + ".." + std::to_string(good);
        }
      }
      throw DynamicShapeError("the model does not import at " + at + " (within --dim's range): " + e.what() + "; " +
                              advice);
    }
  };
  std::vector<int64_t> top_values;
  for (const DimRange &r : symbols) top_values.push_back(r.max);
  Graph top = import_at(top_values);
  SymbolicGraph result;
  result.symbols = symbols;
  result.axes.resize(top.values.size());
  for (size_t v = 0; v < top.values.size(); ++v) result.axes[v].assign(top.values[v].type.shape.size(), {});
  // Constants folded on the way (shapes, index arithmetic) stay among the values; only
  // those an operator reads, or the model returns, matter.
  std::vector<bool> read(top.values.size(), false);
  for (const Node &n : top.nodes)
    for (ValueId in : n.inputs) read[static_cast<size_t>(in)] = true;
  for (ValueId out : top.outputs) read[static_cast<size_t>(out)] = true;
  for (size_t s = 0; s < symbols.size(); ++s) {
    const DimRange &r = symbols[s];
    if (r.is_fixed()) continue;
    std::vector<int64_t> probe_values = top_values;
    --probe_values[s];
    const std::string when =
        "at '" + r.name + "' = " + std::to_string(probe_values[s]) + " and " + std::to_string(r.max);
    Graph probe = import_at(probe_values);
    require_same_structure(top, probe, when);
    for (size_t v = 0; v < top.values.size(); ++v) {
      const std::vector<int64_t> &large = top.values[v].type.shape, &small = probe.values[v].type.shape;
      for (size_t a = 0; a < large.size(); ++a) {
        if (large[a] == small[a]) continue;
        int64_t delta = large[a] - small[a];
        std::string at = value_description(top, static_cast<ValueId>(v)) + " has extent " + std::to_string(large[a]) +
                         " along axis " + std::to_string(a) + " at '" + r.name + "' = " + std::to_string(r.max);
        if (delta < 0 || large[a] != delta * r.max)
          throw DynamicShapeError(at + " and " + std::to_string(small[a]) + " at one less: Kiln's dynamic dimensions " +
                                  "need extents proportional to the dimension (a concatenation, a border or a stride " +
                                  "along it is not supported yet); fix it with --dim " + r.name + "=VALUE");
        if (result.axes[v][a].is_symbolic())
          throw DynamicShapeError(at + ", which also depends on '" +
                                  symbols[static_cast<size_t>(result.axes[v][a].symbol)].name +
                                  "': an axis may follow one dynamic dimension only; fix one with --dim NAME=VALUE");
        result.axes[v][a] = {static_cast<int>(s), delta};
      }
      if (!top.values[v].is_constant() || !read[v]) continue;
      const ir::HostTensor &c_large = *top.values[v].constant, &c_small = *probe.values[v].constant;
      bool ok = large == small ? same_bytes(c_large, c_small) : is_leading_part(c_small, c_large);
      if (!ok)
        throw DynamicShapeError(value_description(top, static_cast<ValueId>(v)) +
                                " is a constant computed from the dimension '" + r.name +
                                "' whose values change with it (not only its length): Kiln cannot run it for every "
                                "value in the range; fix the dimension with --dim " +
                                r.name + "=VALUE");
    }
  }
  // Keep the structure, and the data only of constants that vary with a dimension.
  for (size_t v = 0; v < top.values.size(); ++v)
    if (top.values[v].is_constant() && !has_symbolic_axis(result.axes[v])) {
      Value &value = top.values[v];
      value.constant = std::make_shared<const ir::HostTensor>(value.type.dtype, std::vector<int64_t>{0});
    }
  result.at_max = std::move(top);
  for (ValueId in : result.at_max.inputs)
    for (const SymbolicAxis &a : result.axes[static_cast<size_t>(in)])
      if (a.is_symbolic() && a.scale != 1) throw std::logic_error("an input axis with a multiple of a dimension");
  return result;
}

Graph bucket_graph(Graph graph, const SymbolicGraph &symbolic, const std::vector<int64_t> &values) {
  if (values.size() != symbolic.symbols.size()) throw std::invalid_argument("bucket_graph: one value per dimension");
  std::string when = "at";
  for (size_t s = 0; s < values.size(); ++s)
    when += (s ? ", '" : " '") + symbolic.symbols[s].name + "' = " + std::to_string(values[s]);
  require_same_structure(symbolic.at_max, graph, when);
  std::vector<bool> read(graph.values.size(), false);
  for (const Node &n : graph.nodes)
    for (ValueId in : n.inputs) read[static_cast<size_t>(in)] = true;
  for (ValueId out : graph.outputs) read[static_cast<size_t>(out)] = true;
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const std::vector<int64_t> &shape = graph.values[v].type.shape;
    for (size_t a = 0; a < shape.size(); ++a) {
      const SymbolicAxis &sa = symbolic.axes[v][a];
      int64_t want = sa.is_symbolic() ? sa.scale * values[static_cast<size_t>(sa.symbol)]
                                      : symbolic.at_max.values[v].type.shape[a];
      if (shape[a] != want)
        throw DynamicShapeError(value_description(graph, static_cast<ValueId>(v)) + " has extent " +
                                std::to_string(shape[a]) + " along axis " + std::to_string(a) + " " + when +
                                ", where its extents at the range's ends predict " + std::to_string(want) +
                                ": the extent is not proportional to the dimension; fix it with --dim NAME=VALUE");
    }
    if (graph.values[v].is_constant() && read[v] && has_symbolic_axis(symbolic.axes[v]) &&
        !is_leading_part(*graph.values[v].constant, *symbolic.at_max.values[v].constant))
      throw DynamicShapeError(value_description(graph, static_cast<ValueId>(v)) + " is a constant whose values " +
                              when + " are not the leading part of its values at the range's maximum");
  }

  BucketRules rules(graph, symbolic);
  std::vector<NodePlan> plans;
  for (const Node &n : graph.nodes) plans.push_back(rules.plan(n));

  std::vector<Node> nodes = std::move(graph.nodes);
  graph.nodes.clear();
  std::vector<ValueId> dim_inputs(symbolic.symbols.size(), -1);
  auto dim_input = [&](int s) {
    ValueId &id = dim_inputs[static_cast<size_t>(s)];
    if (id < 0) {
      Value v;
      v.name = dim_input_name(symbolic.symbols[static_cast<size_t>(s)].name);
      v.type = {{1}, ir::DType::kFloat32};
      id = graph.add_value(std::move(v));
      graph.inputs.push_back(id);
    }
    return id;
  };
  auto add_constant = [&](ir::HostTensor data, const std::string &name) {
    Value v;
    v.name = name;
    v.type = {data.shape(), data.dtype()};
    v.constant = std::make_shared<const ir::HostTensor>(std::move(data));
    return graph.add_value(std::move(v));
  };
  auto add_node = [&](const std::string &op, std::vector<ValueId> inputs, ir::TensorType type, const std::string &name,
                      const std::string &source, nlohmann::json attrs) {
    Value out;
    out.name = name;
    out.type = std::move(type);
    ValueId id = graph.add_value(std::move(out));
    const ops::OpDef *def = ops::find_op(op);
    graph.nodes.push_back({op, ops::complete_attrs(*def, attrs), std::move(inputs), id, source});
    return id;
  };
  std::map<std::tuple<ValueId, size_t, double>, ValueId> masked;
  auto mask = [&](ValueId v, size_t axis, double fill, const std::string &source) {
    auto key = std::make_tuple(v, axis, fill);
    if (auto it = masked.find(key); it != masked.end()) return it->second;
    const Value value = graph.values[static_cast<size_t>(v)];
    const SymbolicAxis &sa = symbolic.axes[static_cast<size_t>(v)][axis];
    std::vector<int64_t> iota_shape(value.type.shape.size(), 1);
    iota_shape[axis] = value.type.shape[axis];
    ir::HostTensor iota(ir::DType::kFloat32, iota_shape);
    for (int64_t k = 0; k < iota.size(); ++k) iota.set(k, static_cast<double>(k / sa.scale));
    const std::string base = value.name + ".valid" + std::to_string(axis);
    ValueId positions = add_constant(std::move(iota), base + ".positions");
    ValueId valid = add_node("less", {positions, dim_input(sa.symbol)}, {iota_shape, ir::DType::kBool}, base, source,
                             nlohmann::json::object());
    ir::HostTensor fill_data(value.type.dtype, {1});
    fill_data.fill(fill);
    ValueId fill_value = add_constant(std::move(fill_data), base + ".fill");
    ir::TensorType type = value.type;
    type.constant = false;
    ValueId out = add_node("where", {valid, v, fill_value}, type, value.name + ".masked" + std::to_string(axis), source,
                           nlohmann::json::object());
    masked[key] = out;
    return out;
  };

  std::map<ValueId, ValueId> replaced;  // results rescaled after their node
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node n = std::move(nodes[i]);
    for (ValueId &in : n.inputs)
      if (auto it = replaced.find(in); it != replaced.end()) in = it->second;
    const ValueId original_output = n.output;
    for (const Mask &m : plans[i].masks) n.inputs[m.input] = mask(n.inputs[m.input], m.axis, m.fill, n.source);
    const std::string source = n.source;
    graph.nodes.push_back(std::move(n));
    if (plans[i].mean_axes.empty()) continue;
    // reduce_mean divided by the padded count: multiply by padded / actual.
    const ValueId reduced = graph.nodes.back().output;
    const Value input = graph.values[static_cast<size_t>(symbolic.at_max.nodes[i].inputs[0])];
    double padded = 1;
    ValueId actual = -1;
    for (size_t a : plans[i].mean_axes) {
      const SymbolicAxis &sa = symbolic.axes[static_cast<size_t>(symbolic.at_max.nodes[i].inputs[0])][a];
      padded *= static_cast<double>(input.type.shape[a]);
      ValueId count = dim_input(sa.symbol);
      if (sa.scale != 1) {
        ir::HostTensor scale(ir::DType::kFloat32, {1});
        scale.fill(static_cast<double>(sa.scale));
        count = add_node("mul", {count, add_constant(std::move(scale), input.name + ".scale")},
                         {{1}, ir::DType::kFloat32}, input.name + ".count", source, nlohmann::json::object());
      }
      actual = actual < 0 ? count
                          : add_node("mul", {actual, count}, {{1}, ir::DType::kFloat32}, input.name + ".count", source,
                                     nlohmann::json::object());
    }
    ir::HostTensor padded_data(ir::DType::kFloat32, {1});
    padded_data.fill(padded);
    ValueId factor = add_node("div", {add_constant(std::move(padded_data), input.name + ".padded"), actual},
                              {{1}, ir::DType::kFloat32}, input.name + ".rescale", source, nlohmann::json::object());
    // The rescaled mean keeps the model's tensor name: it may be a graph output.
    Value &padded_mean = graph.values[static_cast<size_t>(reduced)];
    const std::string name = padded_mean.name;
    const ir::TensorType type = padded_mean.type;
    padded_mean.name += ".padded";
    replaced[original_output] = add_node("mul", {reduced, factor}, type, name, source, nlohmann::json::object());
  }
  for (ValueId &out : graph.outputs)
    if (auto it = replaced.find(out); it != replaced.end()) out = it->second;
  return graph;
}

std::string rows_interact(const SymbolicGraph &symbolic, size_t symbol) {
  const Graph &g = symbolic.at_max;
  const int sym = static_cast<int>(symbol);
  auto axes_of = [&](ValueId v) -> const std::vector<SymbolicAxis> & { return symbolic.axes[static_cast<size_t>(v)]; };
  auto count_in = [&](ValueId v) {
    int count = 0;
    for (const SymbolicAxis &a : axes_of(v)) count += a.symbol == sym;
    return count;
  };
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (count_in(static_cast<ValueId>(v)) > 1)
      return value_description(g, static_cast<ValueId>(v)) + " has the dimension on two axes";
    if (g.values[v].is_constant() && count_in(static_cast<ValueId>(v)) > 0)
      return value_description(g, static_cast<ValueId>(v)) + " is a constant along the dimension";
  }
  for (ValueId out : g.outputs)
    if (count_in(out) == 0) return "output '" + g.values[static_cast<size_t>(out)].name + "' has no axis along it";
  BucketRules rules(g, symbolic);
  for (const Node &n : g.nodes) {
    if (count_in(n.output) == 0) {
      for (ValueId in : n.inputs)
        if (count_in(in) > 0) return node_description(n) + " reduces or reads across it";
      continue;
    }
    bool from_input = false;
    for (ValueId in : n.inputs) from_input = from_input || count_in(in) > 0;
    if (!from_input) return node_description(n) + " makes values along it from nothing (positions)";
    for (const Mask &m : rules.plan(n).masks)
      if (axes_of(n.inputs[m.input])[m.axis].symbol == sym) return node_description(n) + " reduces over it";
  }
  return "";
}

std::vector<int64_t> choose_split_buckets(const DimRange &range, int count) {
  std::vector<int64_t> buckets;
  for (int64_t v = 1; v < range.max; v *= 2) buckets.push_back(v);
  buckets.push_back(range.max);
  if (count < 1) count = 1;
  if (buckets.size() > static_cast<size_t>(count)) buckets.erase(buckets.begin(), buckets.end() - count);
  return buckets;
}

std::vector<double> bucket_runs(const DimRange &range, const std::vector<int64_t> &buckets, int max_pieces) {
  if (max_pieces <= 1) return bucket_probabilities(range, buckets);
  const double total = total_weight(range);
  std::vector<double> runs(buckets.size(), 0.0);
  for (int64_t v = range.min; v <= range.max; ++v) {
    double p = probability_of(range, v, total);
    if (p <= 0) continue;
    for (int64_t piece : support::split_into_pieces(v, buckets, max_pieces))
      runs[static_cast<size_t>(std::find(buckets.begin(), buckets.end(), piece) - buckets.begin())] += p;
  }
  return runs;
}

}  // namespace kiln::frontend
