#include "ir/schedule/schedule.h"

#include <functional>
#include <numeric>

#include "ir/schedule/primitives.h"

namespace kiln::ir {

using nlohmann::json;

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

void Schedule::record(std::string kind, json inputs, json attrs, std::vector<std::string> outputs,
                      std::optional<json> decision) {
  trace_.instructions.push_back(Instruction{std::move(kind), std::move(inputs), std::move(attrs), std::move(outputs)});
  if (decision) trace_.decisions[trace_.instructions.size() - 1] = std::move(*decision);
}

std::string Schedule::block_name(const BlockRV &block) const { return block_of("block_name", block); }

const ForNode *Schedule::loop(const LoopRV &rv) const {
  Stmt s = sched::find_loop(func_, loop_var("loop", rv).get());
  return s.as<ForNode>();
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
  record("get_block", json::array(), json{{"name", name}}, {rv.name});
  return rv;
}

std::vector<LoopRV> Schedule::get_loops(const BlockRV &block) {
  const std::string &name = block_of("get_loops", block);
  Stmt b = sched::find_block(func_, name, "get_loops");
  std::vector<LoopRV> loops;
  std::vector<std::string> outs;
  for (const Stmt &s : sched::loops_above(func_, b.get())) {
    loops.push_back(LoopRV{new_rv('l', s.as<ForNode>()->loop_var)});
    outs.push_back(loops.back().name);
  }
  record("get_loops", json::array({block.name}), json::object(), outs);
  return loops;
}

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
  record("split", inputs, json::object(), names);
  return out;
}

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
  record("fuse", inputs, json::object(), {rv.name});
  return rv;
}

void Schedule::reorder(const std::vector<LoopRV> &order) {
  std::vector<Var> vars;
  json inputs = json::array();
  for (const LoopRV &l : order) {
    vars.push_back(loop_var("reorder", l));
    inputs.push_back(l.name);
  }
  func_ = sched::reorder(func_, vars);
  record("reorder", inputs, json::object(), {});
}

void Schedule::parallel(const LoopRV &loop) {
  func_ = sched::set_loop_kind(func_, loop_var("parallel", loop), ForKind::kParallel, "", "parallel");
  record("parallel", json::array({loop.name}), json::object(), {});
}

void Schedule::vectorize(const LoopRV &loop) {
  func_ = sched::set_loop_kind(func_, loop_var("vectorize", loop), ForKind::kVectorized, "", "vectorize");
  record("vectorize", json::array({loop.name}), json::object(), {});
}

void Schedule::unroll(const LoopRV &loop) {
  func_ = sched::set_loop_kind(func_, loop_var("unroll", loop), ForKind::kUnrolled, "", "unroll");
  record("unroll", json::array({loop.name}), json::object(), {});
}

void Schedule::bind(const LoopRV &loop, const std::string &thread) {
  func_ = sched::set_loop_kind(func_, loop_var("bind", loop), ForKind::kThreadBinding, thread, "bind");
  record("bind", json::array({loop.name}), json{{"thread", thread}}, {});
}

void Schedule::annotate(const LoopRV &loop, const std::string &key, int64_t value) {
  func_ = sched::annotate_loop(func_, loop_var("annotate", loop), key, value);
  record("annotate", json::array({loop.name}), json{{"key", key}, {"value", value}}, {});
}

void Schedule::annotate(const BlockRV &block, const std::string &key, int64_t value) {
  func_ = sched::annotate_block(func_, block_of("annotate", block), key, value);
  record("annotate", json::array({block.name}), json{{"key", key}, {"value", value}}, {});
}

void Schedule::annotate(const BlockRV &block, const std::string &key, const ExprRV &value) {
  func_ = sched::annotate_block(func_, block_of("annotate", block), key, this->value(value));
  record("annotate", json::array({block.name, value.name}), json{{"key", key}}, {});
}

void Schedule::compute_at(const BlockRV &block, const LoopRV &loop) {
  const std::string &name = block_of("compute_at", block);
  if (!is_root(loop)) func_ = sched::compute_at(func_, name, loop_var("compute_at", loop));
  record("compute_at", json::array({block.name, loop.name}), json::object(), {});
}

void Schedule::reverse_compute_at(const BlockRV &block, const LoopRV &loop) {
  const std::string &name = block_of("reverse_compute_at", block);
  if (!is_root(loop)) func_ = sched::reverse_compute_at(func_, name, loop_var("reverse_compute_at", loop));
  record("reverse_compute_at", json::array({block.name, loop.name}), json::object(), {});
}

void Schedule::compute_inline(const BlockRV &block) {
  func_ = sched::compute_inline(func_, block_of("compute_inline", block));
  record("compute_inline", json::array({block.name}), json::object(), {});
}

void Schedule::reverse_compute_inline(const BlockRV &block) {
  func_ = sched::reverse_compute_inline(func_, block_of("reverse_compute_inline", block));
  record("reverse_compute_inline", json::array({block.name}), json::object(), {});
}

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
  record("cache_read", json::array({block.name}), json{{"read_index", read_index}, {"scope", scope}}, {rv.name});
  return rv;
}

BlockRV Schedule::cache_write(const BlockRV &block, int write_index, const std::string &scope) {
  std::string cache;
  const std::string &name = block_of("cache_write", block);
  func_ = sched::cache_write(func_, name, write_index, cache_scope("cache_write", name, scope), &cache);
  BlockRV rv{new_rv('b', cache)};
  record("cache_write", json::array({block.name}), json{{"write_index", write_index}, {"scope", scope}}, {rv.name});
  return rv;
}

BlockRV Schedule::rfactor(const LoopRV &loop, int factor_axis) {
  std::string rf;
  func_ = sched::rfactor(func_, loop_var("rfactor", loop), factor_axis, &rf);
  BlockRV rv{new_rv('b', rf)};
  record("rfactor", json::array({loop.name}), json{{"factor_axis", factor_axis}}, {rv.name});
  return rv;
}

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

std::vector<ExprRV> Schedule::sample_perfect_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                                  std::optional<std::vector<int64_t>> decision,
                                                  int64_t innermost_multiple) {
  const std::string P = "sample_perfect_tile";
  Stmt s = sched::find_loop(func_, loop_var(P, loop).get());
  if (!s.defined()) throw ScheduleError(P, "loop '" + loop.name + "' no longer exists");
  int64_t extent = s.as<ForNode>()->extent;
  if (n < 1) throw ScheduleError(P, "needs at least one tile level, got " + std::to_string(n));
  std::vector<int64_t> factors;
  if (decision) {
    factors = *decision;
    int64_t product = std::accumulate(factors.begin(), factors.end(), int64_t{1}, std::multiplies<>());
    if (static_cast<int>(factors.size()) != n || product != extent ||
        (max_innermost_factor > 0 && factors.back() > max_innermost_factor))
      throw ScheduleError(
          P, "decision " + json(factors).dump() + " is not a " + std::to_string(n) + "-level perfect tiling of " +
                 sched::describe_loop(s.as<ForNode>()) +
                 (max_innermost_factor > 0 ? " with innermost factor <= " + std::to_string(max_innermost_factor) : ""));
  } else {
    std::vector<std::vector<int64_t>> all;
    std::vector<int64_t> prefix;
    enumerate_tilings(extent, n, max_innermost_factor, prefix, all);
    if (innermost_multiple > 0) {
      std::vector<std::vector<int64_t>> whole;
      for (const std::vector<int64_t> &t : all)
        if (t.back() % innermost_multiple == 0) whole.push_back(t);
      if (!whole.empty()) all = std::move(whole);
    }
    if (all.empty()) {
      throw ScheduleError(P, "there is no " + std::to_string(n) + "-level perfect tiling of " +
                                 sched::describe_loop(s.as<ForNode>()) +
                                 " with innermost factor <= " + std::to_string(max_innermost_factor));
    }
    factors = all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng_)];
  }
  std::vector<ExprRV> out;
  std::vector<std::string> names;
  for (int64_t f : factors) {
    out.push_back(ExprRV{new_rv('v', f)});
    names.push_back(out.back().name);
  }
  json attrs{{"n", n}, {"max_innermost_factor", max_innermost_factor}};
  if (innermost_multiple > 0) attrs["innermost_multiple"] = innermost_multiple;
  record("sample_perfect_tile", json::array({loop.name}), attrs, names, json(factors));
  return out;
}

ExprRV Schedule::sample_categorical(const std::vector<int64_t> &candidates, const std::vector<double> &probs,
                                    std::optional<int64_t> decision) {
  const std::string P = "sample_categorical";
  if (candidates.empty() || candidates.size() != probs.size())
    throw ScheduleError(P, "needs as many probabilities as candidates (and at least one)");
  int64_t index;
  if (decision) {
    index = *decision;
    if (index < 0 || index >= static_cast<int64_t>(candidates.size()))
      throw ScheduleError(P, "decision " + std::to_string(index) + " is outside the " +
                                 std::to_string(candidates.size()) + " candidates");
  } else {
    std::discrete_distribution<int64_t> dist(probs.begin(), probs.end());
    index = dist(rng_);
  }
  ExprRV rv{new_rv('v', candidates[index])};
  record("sample_categorical", json::array(), json{{"candidates", candidates}, {"probs", probs}}, {rv.name},
         json(index));
  return rv;
}

LoopRV Schedule::sample_compute_location(const BlockRV &block, std::optional<int64_t> decision) {
  const std::string P = "sample_compute_location";
  const std::string &name = block_of(P, block);
  Stmt b = sched::find_block(func_, name, P);
  // Candidates: loops of the sole consumer where compute_at succeeds.
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
  if (consumers.size() == 1) {
    for (const Stmt &l : sched::loops_above(func_, consumers[0])) {
      try {
        sched::compute_at(func_, name, l.as<ForNode>()->loop_var);
        candidates.push_back(l.as<ForNode>()->loop_var);
      } catch (const ScheduleError &) {
        // Not a legal location; skip it.
      }
    }
  }
  int64_t index;
  if (decision) {
    index = *decision;
    if (index < -1 || index >= static_cast<int64_t>(candidates.size()))
      throw ScheduleError(P, "decision " + std::to_string(index) + " is outside the " +
                                 std::to_string(candidates.size()) + " legal locations of block '" + name + "'");
  } else {
    index = std::uniform_int_distribution<int64_t>(-1, static_cast<int64_t>(candidates.size()) - 1)(rng_);
  }
  LoopRV rv{index < 0 ? new_rv('l', RootLoop{}) : new_rv('l', candidates[index])};
  record("sample_compute_location", json::array({block.name}), json::object(), {rv.name}, json(index));
  return rv;
}

// ---- replay ------------------------------------------------------------------------------

Schedule Schedule::replay(const PrimFunc &func, const Trace &trace, const std::map<size_t, json> &overrides,
                          uint64_t seed) {
  Schedule sch(func, seed);
  std::map<std::string, std::string> rename;  // trace RV name -> this schedule's RV name
  auto rv = [&](const json &in, size_t i) -> std::string {
    if (!in.is_string())
      throw ScheduleError("replay",
                          "instruction " + std::to_string(i) + " expects a random variable, got " + in.dump());
    auto it = rename.find(in.get<std::string>());
    if (it == rename.end())
      throw ScheduleError(
          "replay", "instruction " + std::to_string(i) + " uses '" + in.get<std::string>() + "' before it is defined");
    return it->second;
  };
  auto bind_outputs = [&](const Instruction &inst, const std::vector<std::string> &names, size_t i) {
    if (names.size() != inst.outputs.size())
      throw ScheduleError("replay", "instruction " + std::to_string(i) + " (" + inst.kind + ") produced " +
                                        std::to_string(names.size()) + " results where the trace has " +
                                        std::to_string(inst.outputs.size()));
    for (size_t k = 0; k < names.size(); ++k) rename[inst.outputs[k]] = names[k];
  };
  for (size_t i = 0; i < trace.instructions.size(); ++i) {
    const Instruction &inst = trace.instructions[i];
    const json &in = inst.inputs;
    const json &at = inst.attrs;
    std::optional<json> decision;
    if (auto it = overrides.find(i); it != overrides.end()) {
      decision = it->second;
    } else if (auto d = trace.decisions.find(i); d != trace.decisions.end()) {
      decision = d->second;
    }
    try {
      const std::string &k = inst.kind;
      std::vector<std::string> outs;
      if (k == "get_block") {
        outs.push_back(sch.get_block(at.at("name").get<std::string>()).name);
      } else if (k == "get_loops") {
        for (const LoopRV &l : sch.get_loops(BlockRV{rv(in.at(0), i)})) outs.push_back(l.name);
      } else if (k == "split") {
        std::vector<Factor> factors;
        for (size_t a = 1; a < in.size(); ++a) {
          if (in[a].is_number_integer()) {
            factors.emplace_back(in[a].get<int64_t>());
          } else {
            factors.emplace_back(ExprRV{rv(in[a], i)});
          }
        }
        for (const LoopRV &l : sch.split(LoopRV{rv(in.at(0), i)}, factors)) outs.push_back(l.name);
      } else if (k == "fuse" || k == "reorder") {
        std::vector<LoopRV> loops;
        for (const json &x : in) loops.push_back(LoopRV{rv(x, i)});
        if (k == "fuse") {
          outs.push_back(sch.fuse(loops).name);
        } else {
          sch.reorder(loops);
        }
      } else if (k == "parallel") {
        sch.parallel(LoopRV{rv(in.at(0), i)});
      } else if (k == "vectorize") {
        sch.vectorize(LoopRV{rv(in.at(0), i)});
      } else if (k == "unroll") {
        sch.unroll(LoopRV{rv(in.at(0), i)});
      } else if (k == "bind") {
        sch.bind(LoopRV{rv(in.at(0), i)}, at.at("thread").get<std::string>());
      } else if (k == "annotate") {
        std::string target = rv(in.at(0), i);
        if (in.size() == 2) {
          sch.annotate(BlockRV{target}, at.at("key").get<std::string>(), ExprRV{rv(in.at(1), i)});
        } else if (target[0] == 'b') {
          sch.annotate(BlockRV{target}, at.at("key").get<std::string>(), at.at("value").get<int64_t>());
        } else {
          sch.annotate(LoopRV{target}, at.at("key").get<std::string>(), at.at("value").get<int64_t>());
        }
      } else if (k == "compute_at") {
        sch.compute_at(BlockRV{rv(in.at(0), i)}, LoopRV{rv(in.at(1), i)});
      } else if (k == "reverse_compute_at") {
        sch.reverse_compute_at(BlockRV{rv(in.at(0), i)}, LoopRV{rv(in.at(1), i)});
      } else if (k == "compute_inline") {
        sch.compute_inline(BlockRV{rv(in.at(0), i)});
      } else if (k == "reverse_compute_inline") {
        sch.reverse_compute_inline(BlockRV{rv(in.at(0), i)});
      } else if (k == "cache_read") {
        outs.push_back(
            sch.cache_read(BlockRV{rv(in.at(0), i)}, at.at("read_index").get<int>(), at.at("scope").get<std::string>())
                .name);
      } else if (k == "cache_write") {
        outs.push_back(sch.cache_write(BlockRV{rv(in.at(0), i)}, at.at("write_index").get<int>(),
                                       at.at("scope").get<std::string>())
                           .name);
      } else if (k == "rfactor") {
        outs.push_back(sch.rfactor(LoopRV{rv(in.at(0), i)}, at.at("factor_axis").get<int>()).name);
      } else if (k == "sample_perfect_tile") {
        std::optional<std::vector<int64_t>> d;
        if (decision) d = decision->get<std::vector<int64_t>>();
        for (const ExprRV &v : sch.sample_perfect_tile(LoopRV{rv(in.at(0), i)}, at.at("n").get<int>(),
                                                       at.at("max_innermost_factor").get<int64_t>(), d,
                                                       at.value("innermost_multiple", int64_t{0})))
          outs.push_back(v.name);
      } else if (k == "sample_categorical") {
        std::optional<int64_t> d;
        if (decision) d = decision->get<int64_t>();
        outs.push_back(sch.sample_categorical(at.at("candidates").get<std::vector<int64_t>>(),
                                              at.at("probs").get<std::vector<double>>(), d)
                           .name);
      } else if (k == "sample_compute_location") {
        std::optional<int64_t> d;
        if (decision) d = decision->get<int64_t>();
        outs.push_back(sch.sample_compute_location(BlockRV{rv(in.at(0), i)}, d).name);
      } else {
        throw ScheduleError("replay", "unknown instruction kind '" + k + "' at instruction " + std::to_string(i));
      }
      bind_outputs(inst, outs, i);
    } catch (const json::exception &e) {
      throw ScheduleError("replay",
                          "instruction " + std::to_string(i) + " (" + inst.kind + ") is malformed: " + e.what());
    }
  }
  return sch;
}

}  // namespace kiln::ir
