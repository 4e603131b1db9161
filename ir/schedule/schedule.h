// Schedule: a program plus the primitives that transform it. Every successful primitive
// records one instruction in the trace (its entry in the instruction table,
// instruction_kind.h, says how to replay it); a failing one throws ScheduleError and
// leaves program and trace unchanged, and its try_ form, for rules that probe, returns
// false instead. Random variables (RVs) name blocks, loops and sampled integers so
// traces can be replayed on a fresh program.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "ir/schedule/analysis.h"
#include "ir/schedule/instruction_kind.h"
#include "ir/schedule/trace.h"

namespace kiln::ir {

struct BlockRV {
  std::string name;
};
struct LoopRV {
  std::string name;
};
struct ExprRV {
  std::string name;
};

/// A split factor: a literal, an inferred factor (-1) or a sampled integer.
using Factor = std::variant<int64_t, ExprRV>;

class Schedule {
 public:
  explicit Schedule(PrimFunc func, uint64_t seed = 0);

  const PrimFunc &func() const { return func_; }
  const Trace &trace() const { return trace_; }

  // ---- lookups -------------------------------------------------------------------------
  BlockRV get_block(const std::string &name);
  std::vector<LoopRV> get_loops(const BlockRV &block);
  /// Current names for messages and tests.
  std::string block_name(const BlockRV &block) const;
  /// The loop as the program has it now; the handle stays valid after later primitives
  /// (it then describes the program of this call).
  NodeRef<ForNode> loop(const LoopRV &loop) const;
  int64_t value(const ExprRV &v) const;
  /// The names of all blocks other than the root, in program order.
  std::vector<std::string> block_names() const;

  // ---- loop transformations -----------------------------------------------------------
  std::vector<LoopRV> split(const LoopRV &loop, const std::vector<Factor> &factors);
  LoopRV fuse(const std::vector<LoopRV> &loops);
  void reorder(const std::vector<LoopRV> &order);
  void parallel(const LoopRV &loop);
  void vectorize(const LoopRV &loop);
  void unroll(const LoopRV &loop);
  void bind(const LoopRV &loop, const std::string &thread);
  void annotate(const LoopRV &loop, const std::string &key, int64_t value);
  void annotate(const BlockRV &block, const std::string &key, int64_t value);
  /// The value comes from a sampled integer, so changing its decision changes the
  /// annotation on replay.
  void annotate(const BlockRV &block, const std::string &key, const ExprRV &value);

  // ---- compute location ---------------------------------------------------------------
  /// A root LoopRV (from sample_compute_location) makes these no-ops.
  void compute_at(const BlockRV &block, const LoopRV &loop);
  void reverse_compute_at(const BlockRV &block, const LoopRV &loop);
  void compute_inline(const BlockRV &block);
  void reverse_compute_inline(const BlockRV &block);

  // ---- caching and reductions ---------------------------------------------------------
  BlockRV cache_read(const BlockRV &block, int read_index, const std::string &scope);
  BlockRV cache_write(const BlockRV &block, int write_index, const std::string &scope);
  BlockRV rfactor(const LoopRV &loop, int factor_axis);

  // ---- sampling (decisions live in the trace) -----------------------------------------
  /// n factors whose product is the loop's extent, innermost <= max_innermost_factor
  /// (0 = no cap). With innermost_multiple > 0, sampling prefers tilings whose innermost
  /// factor is a multiple of it (whole vectors) when the extent has any; a decision
  /// need not honour it (mutations may leave it, postprocessors judge).
  std::vector<ExprRV> sample_perfect_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                          std::optional<std::vector<int64_t>> decision = std::nullopt,
                                          int64_t innermost_multiple = 0);
  /// n factors for a split that need not divide the extent: the outermost is
  /// ceil(extent / product of the others), so only the last outer tile is partial (a
  /// predicate keeps it in bounds; code generation versions the full tiles apart).
  /// Inner factors come from tile_factor_choices; the innermost is a multiple of
  /// innermost_multiple when that is > 0 (whole vectors), and <= max_innermost_factor.
  /// Sampling also proposes perfect tilings where the extent has factors in range, and
  /// prefers tilings that pad little. A decision whose outermost factor is -1 has it
  /// inferred (mutators change inner factors only).
  std::vector<ExprRV> sample_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                  int64_t innermost_multiple = 0,
                                  std::optional<std::vector<int64_t>> decision = std::nullopt);
  ExprRV sample_categorical(const std::vector<int64_t> &candidates, const std::vector<double> &probs,
                            std::optional<int64_t> decision = std::nullopt);
  /// A loop of the block's sole consumer where compute_at is legal and that no unrolled
  /// loop encloses (the unrolled loop included), or the root.
  LoopRV sample_compute_location(const BlockRV &block, std::optional<int64_t> decision = std::nullopt);

  // ---- probes -------------------------------------------------------------------------
  // For rules and postprocessors asking whether a primitive applies: each applies it and
  // returns true (or its result), or leaves the schedule unchanged and returns false
  // (nullopt), with the reason in `why` when given.
  bool try_compute_at(const BlockRV &block, const LoopRV &loop, std::string *why = nullptr);
  bool try_reverse_compute_at(const BlockRV &block, const LoopRV &loop, std::string *why = nullptr);
  bool try_compute_inline(const BlockRV &block, std::string *why = nullptr);
  bool try_reverse_compute_inline(const BlockRV &block, std::string *why = nullptr);
  bool try_parallel(const LoopRV &loop, std::string *why = nullptr);
  bool try_vectorize(const LoopRV &loop, std::string *why = nullptr);
  std::optional<LoopRV> try_fuse(const std::vector<LoopRV> &loops, std::string *why = nullptr);
  std::optional<BlockRV> try_rfactor(const LoopRV &loop, int factor_axis, std::string *why = nullptr);
  std::optional<std::vector<LoopRV>> try_split(const LoopRV &loop, const std::vector<Factor> &factors,
                                               std::string *why = nullptr);
  std::optional<BlockRV> try_cache_read(const BlockRV &block, int read_index, const std::string &scope,
                                        std::string *why = nullptr);
  std::optional<BlockRV> try_cache_write(const BlockRV &block, int write_index, const std::string &scope,
                                         std::string *why = nullptr);
  std::optional<LoopRV> try_sample_compute_location(const BlockRV &block, std::string *why = nullptr);
  std::optional<std::vector<ExprRV>> try_sample_perfect_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                                             int64_t innermost_multiple = 0,
                                                             std::string *why = nullptr);
  std::optional<std::vector<ExprRV>> try_sample_tile(const LoopRV &loop, int n, int64_t max_innermost_factor,
                                                     int64_t innermost_multiple = 0, std::string *why = nullptr);

  /// replay() for a trace that may not apply (a mutated decision): nullopt, with the
  /// reason in `why` when given.
  static std::optional<Schedule> try_replay(const PrimFunc &func, const Trace &trace, uint64_t seed = 0,
                                            std::string *why = nullptr);
  /// Replays `trace` on `func`; `overrides` replace decisions by instruction index.
  static Schedule replay(const PrimFunc &func, const Trace &trace,
                         const std::map<size_t, nlohmann::json> &overrides = {}, uint64_t seed = 0);
  /// Replays a trace kept as JSON text, as a record stores it: the program a record
  /// gives `func`. Throws what parsing (nlohmann::json::exception, nesting bounded) or
  /// replay throws.
  static Schedule replay_stored(const PrimFunc &func, const std::string &trace_json);

 private:
  struct RootLoop {};
  using Value = std::variant<std::string /*block*/, Var /*loop*/, int64_t /*sampled*/, RootLoop>;

  std::string new_rv(char prefix, Value v);
  const Var &loop_var(const std::string &primitive, const LoopRV &rv) const;
  bool is_root(const LoopRV &rv) const;
  const std::string &block_of(const std::string &primitive, const BlockRV &rv) const;
  void record(const InstructionKind &kind, nlohmann::json inputs, nlohmann::json attrs,
              const std::vector<std::string> &outputs, std::optional<nlohmann::json> decision = std::nullopt);
  /// Runs `primitive` (a call of one of the primitives above); a ScheduleError becomes
  /// false (nullopt) with its message in `why`. The primitive left the schedule as it was.
  template <typename Primitive>
  auto probe(Primitive &&primitive, std::string *why);
  std::vector<ExprRV> record_tiling(const InstructionKind &kind, const LoopRV &loop, int n,
                                    int64_t max_innermost_factor, int64_t innermost_multiple,
                                    const std::vector<int64_t> &factors);

  PrimFunc func_;
  Trace trace_;
  std::map<std::string, Value> rvs_;
  int next_rv_ = 0;
  std::mt19937_64 rng_;
};

/// The values sample_tile draws for an inner level of a tiling: small factors for the
/// middle levels; for the innermost, multiples of `innermost_multiple` (when > 0) up
/// to `max_innermost_factor` (when > 0), else small factors up to it.
std::vector<int64_t> tile_factor_choices(bool innermost, int64_t max_innermost_factor, int64_t innermost_multiple);

}  // namespace kiln::ir
