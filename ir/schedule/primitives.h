// The schedule primitives as pure functions from program to program. Each checks its
// legality and throws ScheduleError (naming itself, the block/loop and the reason)
// without side effects; Schedule (schedule.h) wraps them and records the trace.
#pragma once

#include <string>
#include <vector>

#include "ir/schedule/analysis.h"

namespace kiln::ir::sched {

// ---- loop transformations (loop_transform.cc) -------------------------------------------
/// factors: positive, at most one -1 (inferred); a product above the extent adds a
/// predicate to every block below.
PrimFunc split(const PrimFunc &f, const Var &loop, std::vector<int64_t> factors, std::vector<Var> *new_loops);
PrimFunc fuse(const PrimFunc &f, const std::vector<Var> &loops, Var *fused);
PrimFunc reorder(const PrimFunc &f, const std::vector<Var> &order);
/// parallel / vectorize / unroll / bind (thread_tag for kThreadBinding).
PrimFunc set_loop_kind(const PrimFunc &f, const Var &loop, ForKind kind, const std::string &thread_tag,
                       const std::string &primitive);
PrimFunc annotate_loop(const PrimFunc &f, const Var &loop, const std::string &key, int64_t value);
PrimFunc annotate_block(const PrimFunc &f, const std::string &block, const std::string &key, int64_t value);

// ---- compute location (compute_location.cc) ---------------------------------------------
PrimFunc compute_at(const PrimFunc &f, const std::string &block, const Var &loop);
/// Throws what compute_at would throw, without moving anything: whether a location is
/// legal costs the checks and the region analysis, not the rewrite.
void check_compute_at(const PrimFunc &f, const std::string &block, const Var &loop);
PrimFunc reverse_compute_at(const PrimFunc &f, const std::string &block, const Var &loop);
PrimFunc compute_inline(const PrimFunc &f, const std::string &block);
/// Throws what compute_inline would throw, without inlining (for rules that ask first
/// and then change a schedule they own in place).
void check_compute_inline(const PrimFunc &f, const std::string &block);
PrimFunc reverse_compute_inline(const PrimFunc &f, const std::string &block);

// ---- caching and reduction factoring (cache.cc, rfactor.cc) -----------------------------
PrimFunc cache_read(const PrimFunc &f, const std::string &block, int read_index, MemoryScope scope,
                    std::string *cache_block);
PrimFunc cache_write(const PrimFunc &f, const std::string &block, int write_index, MemoryScope scope,
                     std::string *cache_block);
PrimFunc rfactor(const PrimFunc &f, const Var &loop, int factor_axis, std::string *rf_block);

/// Parses "global" / "shared" / "local".
MemoryScope parse_scope(const std::string &primitive, const std::string &scope);
/// "loop 'i_0' (extent 4)" for messages.
std::string describe_loop(const ForNode *loop);

}  // namespace kiln::ir::sched
