#include "ir/schedule/schedule.h"

#include "support/json_read.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <type_traits>

#include "ir/schedule/primitives.h"
#include "support/internal_check.h"
#include "support/json_checks.h"

namespace kiln::ir {

using nlohmann::json;

namespace {

template <typename RV>
std::vector<std::string> names(const std::vector<RV> &rvs) {
  std::vector<std::string> out;
  for (const RV &rv : rvs) out.push_back(rv.name);
  return out;
}
}  // namespace

Schedule::Schedule(PrimFunc func, uint64_t seed) : func_(std::move(func)), rng_(seed) {}

std::string Schedule::new_rv(char prefix, Value v) {
  std::string name = std::string(1, prefix) + std::to_string(next_rv_++);
  rvs_[name] = std::move(v);
  return name;
}

const Var &Schedule::loop_var(const std::string &primitive, const LoopRV &rv) const {
  auto it = rvs_.find(rv.name);
  if (it == rvs_.end() || !std::holds_alternative<Var>(it->second))
    throw ScheduleError(primitive, "'" + rv.name + "' is not a loop of this schedule");
  return std::get<Var>(it->second);
}

bool Schedule::is_root(const LoopRV &rv) const {
  auto it = rvs_.find(rv.name);
  return it != rvs_.end() && std::holds_alternative<RootLoop>(it->second);
}

const std::string &Schedule::block_of(const std::string &primitive, const BlockRV &rv) const {
  auto it = rvs_.find(rv.name);
  if (it == rvs_.end() || !std::holds_alternative<std::string>(it->second))
    throw ScheduleError(primitive, "'" + rv.name + "' is not a block of this schedule");
  return std::get<std::string>(it->second);
}

void Schedule::record(const InstructionKind &kind, json inputs, json attrs, const std::vector<std::string> &outputs,
                      std::optional<json> decision) {
  Instruction inst{&kind, std::move(inputs), std::move(attrs), {}};
  for (const std::string &name : outputs) inst.outputs.push_back(TraceRV{kind.output_kind, name});
  trace_.instructions.push_back(std::move(inst));
  if (decision) trace_.decisions[trace_.instructions.size() - 1] = std::move(*decision);
}

std::string Schedule::block_name(const BlockRV &block) const { return block_of("block_name", block); }

NodeRef<ForNode> Schedule::loop(const LoopRV &rv) const {
  return NodeRef<ForNode>(sched::find_loop(func_, loop_var("loop", rv).get()));
}

int64_t Schedule::value(const ExprRV &v) const {
  auto it = rvs_.find(v.name);
  if (it == rvs_.end() || !std::holds_alternative<int64_t>(it->second))
    throw ScheduleError("value", "'" + v.name + "' is not a sampled integer");
  return std::get<int64_t>(it->second);
}

std::vector<std::string> Schedule::block_names() const {
  std::vector<std::string> names;
  for (const BlockNode *b : sched::all_blocks(func_)) names.push_back(b->name);
  return names;
}

BlockRV Schedule::get_block(const std::string &name) {
  sched::find_block(func_, name, "get_block");
  BlockRV rv{new_rv('b', name)};
  record(instructions::kGetBlock, json::array(), json{{"name", name}}, {rv.name});
  return rv;
}

const InstructionKind instructions::kGetBlock{"get_block", RVKind::kBlock,
                                              [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                                return {s.get_block(a.attr("name").get<std::string>()).name};
                                              }};

std::vector<LoopRV> Schedule::get_loops(const BlockRV &block) {
  const std::string &name = block_of("get_loops", block);
  Stmt b = sched::find_block(func_, name, "get_loops");
  std::vector<LoopRV> loops;
  std::vector<std::string> outs;
  for (const Stmt &s : sched::loops_above(func_, b.get())) {
    loops.push_back(LoopRV{new_rv('l', s.as<ForNode>()->loop_var)});
    outs.push_back(loops.back().name);
  }
  record(instructions::kGetLoops, json::array({block.name}), json::object(), outs);
  return loops;
}

const InstructionKind instructions::kGetLoops{
    "get_loops", RVKind::kLoop,
    [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> { return names(s.get_loops(a.block(0))); }};

std::vector<LoopRV> Schedule::split(const LoopRV &loop, const std::vector<Factor> &factors) {
  const Var &v = loop_var("split", loop);
  std::vector<int64_t> values;
  json inputs = json::array({loop.name});
  for (const Factor &f : factors) {
    if (const auto *lit = std::get_if<int64_t>(&f)) {
      values.push_back(*lit);
      inputs.push_back(*lit);
    } else {
      const ExprRV &rv = std::get<ExprRV>(f);
      values.push_back(value(rv));
      inputs.push_back(rv.name);
    }
  }
  std::vector<Var> new_vars;
  func_ = sched::split(func_, v, values, &new_vars);
  std::vector<LoopRV> out;
  std::vector<std::string> names;
  for (const Var &nv : new_vars) {
    out.push_back(LoopRV{new_rv('l', nv)});
    names.push_back(out.back().name);
  }
  record(instructions::kSplit, inputs, json::object(), names);
  return out;
}

const InstructionKind instructions::kSplit{"split", RVKind::kLoop,
                                           [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                             std::vector<Factor> factors;
                                             for (size_t i = 1; i < a.num_inputs(); ++i) {
                                               if (a.is_literal(i)) {
                                                 factors.emplace_back(a.literal(i));
                                               } else {
                                                 factors.emplace_back(a.expr(i));
                                               }
                                             }
                                             return names(s.split(a.loop(0), factors));
                                           }};

LoopRV Schedule::fuse(const std::vector<LoopRV> &loops) {
  std::vector<Var> vars;
  json inputs = json::array();
  for (const LoopRV &l : loops) {
    vars.push_back(loop_var("fuse", l));
    inputs.push_back(l.name);
  }
  Var fused;
  func_ = sched::fuse(func_, vars, &fused);
  LoopRV rv{new_rv('l', fused)};
  record(instructions::kFuse, inputs, json::object(), {rv.name});
  return rv;
}

const InstructionKind instructions::kFuse{
    "fuse", RVKind::kLoop,
    [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> { return {s.fuse(a.loops()).name}; }};

void Schedule::reorder(const std::vector<LoopRV> &order) {
  std::vector<Var> vars;
  json inputs = json::array();
  for (const LoopRV &l : order) {
    vars.push_back(loop_var("reorder", l));
    inputs.push_back(l.name);
  }
  func_ = sched::reorder(func_, vars);
  record(instructions::kReorder, inputs, json::object(), {});
}

const InstructionKind instructions::kReorder{"reorder", RVKind::kLoop,
                                             [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                               s.reorder(a.loops());
                                               return {};
                                             }};

void Schedule::parallel(const LoopRV &loop) {
  func_ = sched::set_loop_kind(func_, loop_var("parallel", loop), ForKind::kParallel, "", "parallel");
  record(instructions::kParallel, json::array({loop.name}), json::object(), {});
}

const InstructionKind instructions::kParallel{"parallel", RVKind::kLoop,
                                              [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                                s.parallel(a.loop(0));
                                                return {};
                                              }};

void Schedule::vectorize(const LoopRV &loop) {
  func_ = sched::set_loop_kind(func_, loop_var("vectorize", loop), ForKind::kVectorized, "", "vectorize");
  record(instructions::kVectorize, json::array({loop.name}), json::object(), {});
}

const InstructionKind instructions::kVectorize{"vectorize", RVKind::kLoop,
                                               [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                                 s.vectorize(a.loop(0));
                                                 return {};
                                               }};

void Schedule::unroll(const LoopRV &loop) {
  func_ = sched::set_loop_kind(func_, loop_var("unroll", loop), ForKind::kUnrolled, "", "unroll");
  record(instructions::kUnroll, json::array({loop.name}), json::object(), {});
}

const InstructionKind instructions::kUnroll{"unroll", RVKind::kLoop,
                                            [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                              s.unroll(a.loop(0));
                                              return {};
                                            }};

void Schedule::bind(const LoopRV &loop, const std::string &thread) {
  func_ = sched::set_loop_kind(func_, loop_var("bind", loop), ForKind::kThreadBinding, thread, "bind");
  record(instructions::kBind, json::array({loop.name}), json{{"thread", thread}}, {});
}

const InstructionKind instructions::kBind{"bind", RVKind::kLoop,
                                          [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                            s.bind(a.loop(0), a.attr("thread").get<std::string>());
                                            return {};
                                          }};

void Schedule::annotate(const LoopRV &loop, const std::string &key, int64_t value) {
  func_ = sched::annotate_loop(func_, loop_var("annotate", loop), key, value);
  record(instructions::kAnnotate, json::array({loop.name}), json{{"key", key}, {"value", value}}, {});
}

void Schedule::annotate(const BlockRV &block, const std::string &key, int64_t value) {
  func_ = sched::annotate_block(func_, block_of("annotate", block), key, value);
  record(instructions::kAnnotate, json::array({block.name}), json{{"key", key}, {"value", value}}, {});
}

void Schedule::annotate(const BlockRV &block, const std::string &key, const ExprRV &value) {
  func_ = sched::annotate_block(func_, block_of("annotate", block), key, this->value(value));
  record(instructions::kAnnotate, json::array({block.name, value.name}), json{{"key", key}}, {});
}

// Annotations on a block or a loop, with a literal value or, on a block, a sampled one.
// Which of the two the target is comes from the kind of its random variable.
const InstructionKind instructions::kAnnotate{"annotate", RVKind::kLoop,
                                              [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                                const std::string key = a.attr("key").get<std::string>();
                                                if (a.num_inputs() == 2) {
                                                  s.annotate(a.block(0), key, a.expr(1));
                                                } else if (a.kind_of(0) == RVKind::kBlock) {
                                                  s.annotate(a.block(0), key, a.attr("value").get<int64_t>());
                                                } else {
                                                  s.annotate(a.loop(0), key, a.attr("value").get<int64_t>());
                                                }
                                                return {};
                                              }};

void Schedule::compute_at(const BlockRV &block, const LoopRV &loop) {
  const std::string &name = block_of("compute_at", block);
  if (!is_root(loop)) func_ = sched::compute_at(func_, name, loop_var("compute_at", loop));
  record(instructions::kComputeAt, json::array({block.name, loop.name}), json::object(), {});
}

const InstructionKind instructions::kComputeAt{"compute_at", RVKind::kLoop,
                                               [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                                 s.compute_at(a.block(0), a.loop(1));
                                                 return {};
                                               }};

void Schedule::reverse_compute_at(const BlockRV &block, const LoopRV &loop) {
  const std::string &name = block_of("reverse_compute_at", block);
  if (!is_root(loop)) func_ = sched::reverse_compute_at(func_, name, loop_var("reverse_compute_at", loop));
  record(instructions::kReverseComputeAt, json::array({block.name, loop.name}), json::object(), {});
}

const InstructionKind instructions::kReverseComputeAt{
    "reverse_compute_at", RVKind::kLoop, [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      s.reverse_compute_at(a.block(0), a.loop(1));
      return {};
    }};

void Schedule::compute_inline(const BlockRV &block) {
  func_ = sched::compute_inline(func_, block_of("compute_inline", block));
  record(instructions::kComputeInline, json::array({block.name}), json::object(), {});
}

const InstructionKind instructions::kComputeInline{
    "compute_inline", RVKind::kLoop, [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      s.compute_inline(a.block(0));
      return {};
    }};

void Schedule::reverse_compute_inline(const BlockRV &block) {
  func_ = sched::reverse_compute_inline(func_, block_of("reverse_compute_inline", block));
  record(instructions::kReverseComputeInline, json::array({block.name}), json::object(), {});
}

const InstructionKind instructions::kReverseComputeInline{
    "reverse_compute_inline", RVKind::kLoop, [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      s.reverse_compute_inline(a.block(0));
      return {};
    }};

// The storage scope of a cache stage; the message names the block being staged.
static MemoryScope cache_scope(const std::string &primitive, const std::string &block, const std::string &scope) {
  try {
    return sched::parse_scope(primitive, scope);
  } catch (const ScheduleError &) {
    throw ScheduleError(primitive, "cannot stage block '" + block + "' through unknown storage scope '" + scope +
                                       "'; expected global, shared or local");
  }
}

BlockRV Schedule::cache_read(const BlockRV &block, int read_index, const std::string &scope) {
  std::string cache;
  const std::string &name = block_of("cache_read", block);
  func_ = sched::cache_read(func_, name, read_index, cache_scope("cache_read", name, scope), &cache);
  BlockRV rv{new_rv('b', cache)};
  record(instructions::kCacheRead, json::array({block.name}), json{{"read_index", read_index}, {"scope", scope}},
         {rv.name});
  return rv;
}

const InstructionKind instructions::kCacheRead{
    "cache_read", RVKind::kBlock, [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      return {s.cache_read(a.block(0), a.attr("read_index").get<int>(), a.attr("scope").get<std::string>()).name};
    }};

BlockRV Schedule::cache_write(const BlockRV &block, int write_index, const std::string &scope) {
  std::string cache;
  const std::string &name = block_of("cache_write", block);
  func_ = sched::cache_write(func_, name, write_index, cache_scope("cache_write", name, scope), &cache);
  BlockRV rv{new_rv('b', cache)};
  record(instructions::kCacheWrite, json::array({block.name}), json{{"write_index", write_index}, {"scope", scope}},
         {rv.name});
  return rv;
}

const InstructionKind instructions::kCacheWrite{
    "cache_write", RVKind::kBlock, [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      return {s.cache_write(a.block(0), a.attr("write_index").get<int>(), a.attr("scope").get<std::string>()).name};
    }};

BlockRV Schedule::rfactor(const LoopRV &loop, int factor_axis) {
  std::string rf;
  func_ = sched::rfactor(func_, loop_var("rfactor", loop), factor_axis, &rf);
  BlockRV rv{new_rv('b', rf)};
  record(instructions::kRfactor, json::array({loop.name}), json{{"factor_axis", factor_axis}}, {rv.name});
  return rv;
}

const InstructionKind instructions::kRfactor{"rfactor", RVKind::kBlock,
                                             [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
                                               return {s.rfactor(a.loop(0), a.attr("factor_axis").get<int>()).name};
                                             }};

// ---- sampling ----------------------------------------------------------------------------

static void enumerate_tilings(int64_t extent, int n, int64_t cap, std::vector<int64_t> &prefix,
                              std::vector<std::vector<int64_t>> &out) {
  if (n == 1) {
    if (cap <= 0 || extent <= cap) {
      prefix.push_back(extent);
      out.push_back(prefix);
      prefix.pop_back();
    }
    return;
  }
  for (int64_t d = 1; d <= extent; ++d) {
    if (extent % d) continue;
    prefix.push_back(d);
    enumerate_tilings(extent / d, n - 1, cap, prefix, out);
    prefix.pop_back();
  }
}

std::vector<ExprRV> Schedule::record_tiling(const InstructionKind &kind, const LoopRV &loop, int n,
                                            int64_t max_innermost_factor, int64_t innermost_multiple,
                                            const std::vector<int64_t> &factors) {
  std::vector<ExprRV> out;
  std::vector<std::string> names;
  for (int64_t f : factors) {
    out.push_back(ExprRV{new_rv('v', f)});
    names.push_back(out.back().name);
  }
  json attrs{{"n", n}, {"max_innermost_factor", max_innermost_factor}};
  if (innermost_multiple > 0) attrs["innermost_multiple"] = innermost_multiple;
  record(kind, json::array({loop.name}), attrs, names, json(factors));
  return out;
}

// The tilings whose innermost factor is a multiple of `multiple` (whole vectors).
static std::vector<std::vector<int64_t>> whole_vector_tilings(const std::vector<std::vector<int64_t>> &all,
                                                              int64_t multiple) {
  std::vector<std::vector<int64_t>> whole;
  for (const std::vector<int64_t> &t : all)
    if (t.back() % multiple == 0) whole.push_back(t);
  return whole;
}

std::vector<ExprRV> Schedule::sample_perfect_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                                  std::optional<std::vector<int64_t>> decision,
                                                  int64_t innermost_multiple) {
  const std::string primitive = "sample_perfect_tile";
  Stmt s = sched::find_loop(func_, loop_var(primitive, loop).get());
  if (!s.defined()) throw ScheduleError(primitive, "loop '" + loop.name + "' no longer exists");
  int64_t extent = s.as<ForNode>()->extent;
  if (n < 1) throw ScheduleError(primitive, "needs at least one tile level, got " + std::to_string(n));
  std::vector<int64_t> factors;
  if (decision) {
    factors = *decision;
    int64_t product = std::accumulate(factors.begin(), factors.end(), int64_t{1}, std::multiplies<>());
    if (static_cast<int>(factors.size()) != n || product != extent ||
        (max_innermost_factor > 0 && factors.back() > max_innermost_factor))
      throw ScheduleError(
          primitive,
          "decision " + json(factors).dump() + " is not a " + std::to_string(n) + "-level perfect tiling of " +
              sched::describe_loop(s.as<ForNode>()) +
              (max_innermost_factor > 0 ? " with innermost factor <= " + std::to_string(max_innermost_factor) : ""));
  } else {
    std::vector<std::vector<int64_t>> all;
    std::vector<int64_t> prefix;
    enumerate_tilings(extent, n, max_innermost_factor, prefix, all);
    if (innermost_multiple > 0) {
      std::vector<std::vector<int64_t>> whole = whole_vector_tilings(all, innermost_multiple);
      if (!whole.empty()) all = std::move(whole);
    }
    if (all.empty()) {
      throw ScheduleError(primitive, "there is no " + std::to_string(n) + "-level perfect tiling of " +
                                         sched::describe_loop(s.as<ForNode>()) +
                                         " with innermost factor <= " + std::to_string(max_innermost_factor));
    }
    factors = all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng_)];
  }
  return record_tiling(instructions::kSamplePerfectTile, loop, n, max_innermost_factor, innermost_multiple, factors);
}

const InstructionKind instructions::kSamplePerfectTile{
    "sample_perfect_tile", RVKind::kInt,
    [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      std::optional<std::vector<int64_t>> decision;
      if (a.decision()) decision = a.decision()->get<std::vector<int64_t>>();
      return names(s.sample_perfect_tile(a.loop(0), a.attr("n").get<int>(),
                                         a.attr("max_innermost_factor").get<int64_t>(), decision,
                                         a.attrs().value("innermost_multiple", int64_t{0})));
    },
    true};

std::vector<int64_t> tile_factor_choices(bool innermost, int64_t max_innermost_factor, int64_t innermost_multiple) {
  // Middle levels: a register tile's rows or a cache tile's count of register tiles,
  // where small factors (and not only divisors) are what the search needs.
  constexpr int64_t kLargestSmallFactor = 16;
  std::vector<int64_t> out;
  if (innermost && innermost_multiple > 0) {
    int64_t cap = max_innermost_factor > 0 ? max_innermost_factor : 4 * innermost_multiple;
    for (int64_t m = innermost_multiple; m <= cap; m += innermost_multiple) out.push_back(m);
    return out;
  }
  int64_t cap = kLargestSmallFactor;
  if (innermost && max_innermost_factor > 0) cap = std::min(cap, max_innermost_factor);
  for (int64_t f = 1; f <= cap; ++f) out.push_back(f);
  return out;
}

std::vector<ExprRV> Schedule::sample_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                          int64_t innermost_multiple, std::optional<std::vector<int64_t>> decision) {
  const std::string primitive = "sample_tile";
  Stmt s = sched::find_loop(func_, loop_var(primitive, loop).get());
  if (!s.defined()) throw ScheduleError(primitive, "loop '" + loop.name + "' no longer exists");
  const int64_t extent = s.as<ForNode>()->extent;
  if (n < 2) throw ScheduleError(primitive, "needs at least two tile levels, got " + std::to_string(n));
  auto inner_product = [](const std::vector<int64_t> &f) {
    int64_t p = 1;
    for (size_t i = 1; i < f.size(); ++i) p *= f[i];
    return p;
  };
  std::vector<int64_t> factors;
  if (decision) {
    factors = *decision;
    std::string what = "decision " + json(factors).dump() + " for " + sched::describe_loop(s.as<ForNode>());
    if (static_cast<int>(factors.size()) != n)
      throw ScheduleError(primitive, what + " does not have " + std::to_string(n) + " levels");
    for (size_t i = 1; i < factors.size(); ++i)
      if (factors[i] < 1 || factors[i] > extent)
        throw ScheduleError(primitive, what + ": inner factors must lie in [1, extent]");
    if (max_innermost_factor > 0 && factors.back() > max_innermost_factor)
      throw ScheduleError(primitive, what + ": the innermost factor exceeds " + std::to_string(max_innermost_factor));
    int64_t inner = inner_product(factors);
    if (inner > extent)
      throw ScheduleError(primitive, what + ": the inner factors multiply to " + std::to_string(inner) +
                                         ", more than the extent (no tile would be full)");
    int64_t outer = (extent + inner - 1) / inner;
    if (factors[0] != -1 && factors[0] != outer)
      throw ScheduleError(primitive, what + ": the outermost factor must be " + std::to_string(outer) + " (or -1)");
    factors[0] = outer;
  } else {
    // A handful of draws, perfect and padded; the ones padding at most 1/8 of the
    // extent are kept and one of them is chosen, else the least padded draw.
    constexpr int kDraws = 8;
    std::vector<std::vector<int64_t>> draws, perfect;
    std::vector<int64_t> prefix;
    enumerate_tilings(extent, n, max_innermost_factor, prefix, perfect);
    if (innermost_multiple > 0) perfect = whole_vector_tilings(perfect, innermost_multiple);
    for (int d = 0; d < kDraws; ++d) {
      if (!perfect.empty() && rng_() % 2 == 0) {
        draws.push_back(perfect[std::uniform_int_distribution<size_t>(0, perfect.size() - 1)(rng_)]);
        continue;
      }
      std::vector<int64_t> f(static_cast<size_t>(n), 1);
      int64_t room = extent;
      for (int level = n - 1; level >= 1; --level) {
        std::vector<int64_t> choices = tile_factor_choices(level == n - 1, max_innermost_factor, innermost_multiple);
        std::vector<int64_t> fitting;
        for (int64_t c : choices)
          if (c <= room) fitting.push_back(c);
        if (fitting.empty()) break;  // the rest stay 1
        f[static_cast<size_t>(level)] = fitting[std::uniform_int_distribution<size_t>(0, fitting.size() - 1)(rng_)];
        room /= f[static_cast<size_t>(level)];
      }
      int64_t inner = inner_product(f);
      f[0] = (extent + inner - 1) / inner;
      draws.push_back(f);
    }
    auto padding = [&](const std::vector<int64_t> &f) { return f[0] * inner_product(f) - extent; };
    std::vector<std::vector<int64_t>> little;
    for (const std::vector<int64_t> &f : draws)
      if (padding(f) * 8 <= extent) little.push_back(f);
    if (!little.empty()) {
      factors = little[std::uniform_int_distribution<size_t>(0, little.size() - 1)(rng_)];
    } else {
      factors = *std::min_element(draws.begin(), draws.end(),
                                  [&](const auto &a, const auto &b) { return padding(a) < padding(b); });
    }
  }
  return record_tiling(instructions::kSampleTile, loop, n, max_innermost_factor, innermost_multiple, factors);
}

const InstructionKind instructions::kSampleTile{
    "sample_tile", RVKind::kInt,
    [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      std::optional<std::vector<int64_t>> decision;
      if (a.decision()) decision = a.decision()->get<std::vector<int64_t>>();
      return names(s.sample_tile(a.loop(0), a.attr("n").get<int>(), a.attr("max_innermost_factor").get<int64_t>(),
                                 a.attrs().value("innermost_multiple", int64_t{0}), decision));
    },
    true};

ExprRV Schedule::sample_categorical(const std::vector<int64_t> &candidates, const std::vector<double> &probs,
                                    std::optional<int64_t> decision) {
  const std::string primitive = "sample_categorical";
  if (candidates.empty() || candidates.size() != probs.size())
    throw ScheduleError(primitive, "needs as many probabilities as candidates (and at least one)");
  int64_t index;
  if (decision) {
    index = *decision;
    if (index < 0 || index >= static_cast<int64_t>(candidates.size()))
      throw ScheduleError(primitive, "decision " + std::to_string(index) + " is outside the " +
                                         std::to_string(candidates.size()) + " candidates");
  } else {
    std::discrete_distribution<int64_t> dist(probs.begin(), probs.end());
    index = dist(rng_);
  }
  ExprRV rv{new_rv('v', candidates[index])};
  record(instructions::kSampleCategorical, json::array(), json{{"candidates", candidates}, {"probs", probs}}, {rv.name},
         json(index));
  return rv;
}

const InstructionKind instructions::kSampleCategorical{
    "sample_categorical", RVKind::kInt,
    [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      std::optional<int64_t> decision;
      if (a.decision()) decision = a.decision()->get<int64_t>();
      return {s.sample_categorical(a.attr("candidates").get<std::vector<int64_t>>(),
                                   a.attr("probs").get<std::vector<double>>(), decision)
                  .name};
    },
    true};

LoopRV Schedule::sample_compute_location(const BlockRV &block, std::optional<int64_t> decision) {
  const std::string primitive = "sample_compute_location";
  const std::string &name = block_of(primitive, block);
  Stmt b = sched::find_block(func_, name, primitive);
  // Candidates: loops of the sole consumer where compute_at succeeds, above its first
  // unrolled loop. A producer placed inside an unrolled loop is copied into every
  // unrolled iteration and recomputed in each: the padding of a Winograd input
  // transform placed under its unrolled tile positions ran 10-200x slower than at the
  // tile and took 1-2 s of LLVM to build, against 0.2.
  std::vector<Var> candidates;
  std::vector<Buffer> outs = sched::distinct_buffers(sched::block_writes(b.as<BlockNode>()));
  std::vector<const BlockNode *> consumers;
  for (const BlockNode *other : sched::all_blocks(func_)) {
    if (other == b.as<BlockNode>()) continue;
    for (const Buffer &o : outs)
      if (sched::reads_buffer(other, o.get())) {
        consumers.push_back(other);
        break;
      }
  }
  // Each probe is compute_at's checks and region analysis, a large share of a replay: a
  // replayed decision stops at the location it names (-1, the root, needs none). Only an
  // out-of-range decision counts them all, for its message.
  auto enough = [&] { return decision && *decision < static_cast<int64_t>(candidates.size()); };
  if (consumers.size() == 1 && !enough()) {
    for (const Stmt &l : sched::loops_above(func_, consumers[0])) {
      if (l.as<ForNode>()->for_kind == ForKind::kUnrolled) break;
      try {
        sched::check_compute_at(func_, name, l.as<ForNode>()->loop_var);
        candidates.push_back(l.as<ForNode>()->loop_var);
      } catch (const ScheduleError &) {
        // Not a legal location; skip it.
      }
      if (enough()) break;
    }
  }
  int64_t index;
  if (decision) {
    index = *decision;
    if (index < -1 || index >= static_cast<int64_t>(candidates.size()))
      throw ScheduleError(primitive, "decision " + std::to_string(index) + " is outside the " +
                                         std::to_string(candidates.size()) + " legal locations of block '" + name +
                                         "'");
  } else {
    index = std::uniform_int_distribution<int64_t>(-1, static_cast<int64_t>(candidates.size()) - 1)(rng_);
  }
  LoopRV rv{index < 0 ? new_rv('l', RootLoop{}) : new_rv('l', candidates[index])};
  record(instructions::kSampleComputeLocation, json::array({block.name}), json::object(), {rv.name}, json(index));
  return rv;
}

const InstructionKind instructions::kSampleComputeLocation{
    "sample_compute_location", RVKind::kLoop,
    [](Schedule &s, const InstructionArgs &a) -> std::vector<std::string> {
      std::optional<int64_t> decision;
      if (a.decision()) decision = a.decision()->get<int64_t>();
      return {s.sample_compute_location(a.block(0), decision).name};
    },
    true};

// ---- probes ------------------------------------------------------------------------------

template <typename Primitive>
auto Schedule::probe(Primitive &&primitive, std::string *why) {
  using Result = decltype(primitive());
  try {
    if constexpr (std::is_void_v<Result>) {
      primitive();
      return true;
    } else {
      return std::optional<Result>(primitive());
    }
  } catch (const ScheduleError &e) {
    if (why) *why = e.what();
    if constexpr (std::is_void_v<Result>) {
      return false;
    } else {
      return std::optional<Result>();
    }
  }
}

bool Schedule::try_compute_at(const BlockRV &block, const LoopRV &loop, std::string *why) {
  return probe([&] { compute_at(block, loop); }, why);
}
bool Schedule::try_reverse_compute_at(const BlockRV &block, const LoopRV &loop, std::string *why) {
  return probe([&] { reverse_compute_at(block, loop); }, why);
}
bool Schedule::try_compute_inline(const BlockRV &block, std::string *why) {
  return probe([&] { compute_inline(block); }, why);
}
bool Schedule::try_reverse_compute_inline(const BlockRV &block, std::string *why) {
  return probe([&] { reverse_compute_inline(block); }, why);
}
bool Schedule::try_parallel(const LoopRV &loop, std::string *why) {
  return probe([&] { parallel(loop); }, why);
}
bool Schedule::try_vectorize(const LoopRV &loop, std::string *why) {
  return probe([&] { vectorize(loop); }, why);
}
std::optional<LoopRV> Schedule::try_fuse(const std::vector<LoopRV> &loops, std::string *why) {
  return probe([&] { return fuse(loops); }, why);
}
std::optional<BlockRV> Schedule::try_rfactor(const LoopRV &loop, int factor_axis, std::string *why) {
  return probe([&] { return rfactor(loop, factor_axis); }, why);
}
std::optional<std::vector<LoopRV>> Schedule::try_split(const LoopRV &loop, const std::vector<Factor> &factors,
                                                       std::string *why) {
  return probe([&] { return split(loop, factors); }, why);
}
std::optional<BlockRV> Schedule::try_cache_read(const BlockRV &block, int read_index, const std::string &scope,
                                                std::string *why) {
  return probe([&] { return cache_read(block, read_index, scope); }, why);
}
std::optional<BlockRV> Schedule::try_cache_write(const BlockRV &block, int write_index, const std::string &scope,
                                                 std::string *why) {
  return probe([&] { return cache_write(block, write_index, scope); }, why);
}
std::optional<LoopRV> Schedule::try_sample_compute_location(const BlockRV &block, std::string *why) {
  return probe([&] { return sample_compute_location(block); }, why);
}
std::optional<std::vector<ExprRV>> Schedule::try_sample_perfect_tile(const LoopRV &loop, int n,
                                                                     int64_t max_innermost_factor,
                                                                     int64_t innermost_multiple, std::string *why) {
  return probe([&] { return sample_perfect_tile(loop, n, max_innermost_factor, std::nullopt, innermost_multiple); },
               why);
}
std::optional<std::vector<ExprRV>> Schedule::try_sample_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                                             int64_t innermost_multiple, std::string *why) {
  return probe([&] { return sample_tile(loop, n, max_innermost_factor, innermost_multiple); }, why);
}

// ---- the instruction table ---------------------------------------------------------------

const std::vector<const InstructionKind *> &instruction_kinds() {
  using namespace instructions;
  static const std::vector<const InstructionKind *> kKinds = {&kGetBlock,
                                                              &kGetLoops,
                                                              &kSplit,
                                                              &kFuse,
                                                              &kReorder,
                                                              &kParallel,
                                                              &kVectorize,
                                                              &kUnroll,
                                                              &kBind,
                                                              &kAnnotate,
                                                              &kComputeAt,
                                                              &kReverseComputeAt,
                                                              &kComputeInline,
                                                              &kReverseComputeInline,
                                                              &kCacheRead,
                                                              &kCacheWrite,
                                                              &kRfactor,
                                                              &kSamplePerfectTile,
                                                              &kSampleTile,
                                                              &kSampleCategorical,
                                                              &kSampleComputeLocation};
  return kKinds;
}

const InstructionKind *find_instruction_kind(std::string_view name) {
  for (const InstructionKind *k : instruction_kinds())
    if (k->name == name) return k;
  return nullptr;
}

InstructionArgs::InstructionArgs(const Instruction &instruction, size_t index, std::vector<Input> inputs,
                                 std::optional<json> decision)
    : instruction_(instruction), index_(index), inputs_(std::move(inputs)), decision_(std::move(decision)) {}

static std::string describe_instruction(const Instruction &inst, size_t index) {
  return "instruction " + std::to_string(index) + " (" + std::string(inst.kind->name) + ")";
}

RVKind InstructionArgs::kind_of(size_t i) const {
  if (i >= inputs_.size() || !inputs_[i].rv)
    throw ScheduleError("replay", describe_instruction(instruction_, index_) + " expects a random variable as input " +
                                      std::to_string(i));
  return inputs_[i].rv->kind;
}

bool InstructionArgs::is_literal(size_t i) const { return i < inputs_.size() && !inputs_[i].rv; }

int64_t InstructionArgs::literal(size_t i) const {
  if (!is_literal(i))
    throw ScheduleError(
        "replay", describe_instruction(instruction_, index_) + " expects an integer as input " + std::to_string(i));
  return inputs_[i].literal;
}

const TraceRV &InstructionArgs::rv(size_t i, RVKind kind) const {
  if (kind_of(i) != kind)
    throw ScheduleError("replay", describe_instruction(instruction_, index_) + " expects a " + rv_kind_name(kind) +
                                      " as input " + std::to_string(i) + ", but '" +
                                      instruction_.inputs[i].get<std::string>() + "' is a " + rv_kind_name(kind_of(i)));
  return *inputs_[i].rv;
}

BlockRV InstructionArgs::block(size_t i) const { return BlockRV{rv(i, RVKind::kBlock).name}; }
LoopRV InstructionArgs::loop(size_t i) const { return LoopRV{rv(i, RVKind::kLoop).name}; }
ExprRV InstructionArgs::expr(size_t i) const { return ExprRV{rv(i, RVKind::kInt).name}; }

std::vector<LoopRV> InstructionArgs::loops() const {
  std::vector<LoopRV> out;
  for (size_t i = 0; i < inputs_.size(); ++i) out.push_back(loop(i));
  return out;
}

const json &InstructionArgs::attr(const std::string &key) const { return instruction_.attrs.at(key); }

// ---- replay ------------------------------------------------------------------------------

Schedule Schedule::replay_stored(const PrimFunc &func, const std::string &trace_json) {
  return replay(func, Trace::from_json(support::parse_json(trace_json)));
}

Schedule Schedule::replay(const PrimFunc &func, const Trace &trace, const std::map<size_t, json> &overrides,
                          uint64_t seed) {
  Schedule sch(func, seed);
  std::map<std::string, TraceRV> renamed;  // the trace's name -> this schedule's variable
  for (size_t i = 0; i < trace.instructions.size(); ++i) {
    const Instruction &inst = trace.instructions[i];
    KILN_INTERNAL_CHECK(inst.kind != nullptr, "a trace instruction without a kind");
    std::optional<json> decision;
    if (auto it = overrides.find(i); it != overrides.end()) {
      decision = it->second;
    } else if (auto d = trace.decisions.find(i); d != trace.decisions.end()) {
      decision = d->second;
    }
    std::vector<InstructionArgs::Input> inputs;
    for (const json &in : inst.inputs) {
      if (in.is_number_integer()) {
        inputs.push_back({std::nullopt, in.get<int64_t>()});
        continue;
      }
      if (!in.is_string())
        throw ScheduleError(
            "replay", describe_instruction(inst, i) + " expects a random variable, got " + support::json_excerpt(in));
      auto it = renamed.find(in.get<std::string>());
      if (it == renamed.end())
        throw ScheduleError("replay", describe_instruction(inst, i) + " uses '" +
                                          support::excerpt(in.get<std::string>()) + "' before it is defined");
      inputs.push_back({it->second, 0});
    }
    try {
      std::vector<std::string> outputs = inst.kind->apply(sch, InstructionArgs(inst, i, std::move(inputs), decision));
      if (outputs.size() != inst.outputs.size())
        throw ScheduleError("replay", describe_instruction(inst, i) + " produced " + std::to_string(outputs.size()) +
                                          " results where the trace has " + std::to_string(inst.outputs.size()));
      for (size_t k = 0; k < outputs.size(); ++k)
        renamed[inst.outputs[k].name] = TraceRV{inst.kind->output_kind, outputs[k]};
    } catch (const json::exception &e) {
      throw ScheduleError("replay", describe_instruction(inst, i) + " is malformed: " + e.what());
    }
  }
  return sch;
}

std::optional<Schedule> Schedule::try_replay(const PrimFunc &func, const Trace &trace, uint64_t seed,
                                             std::string *why) {
  try {
    return replay(func, trace, {}, seed);
  } catch (const ScheduleError &e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

}  // namespace kiln::ir
