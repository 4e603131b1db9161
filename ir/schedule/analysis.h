// Queries and rewrites on loop programs shared by the schedule primitives.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/simplify.h"
#include "ir/stmt.h"

namespace kiln::ir {

/// A user error in a schedule: names the primitive, the block/loop and the reason. The
/// schedule is left unchanged.
struct ScheduleError : std::runtime_error {
  ScheduleError(const std::string &primitive, const std::string &reason)
      : std::runtime_error(primitive + ": " + reason), primitive(primitive) {}
  std::string primitive;
};

namespace sched {

/// Root-to-node chain of statements (inclusive); empty when not found.
std::vector<Stmt> path_to(const Stmt &root, const StmtNode *target);
/// The block statement named `name`; throws ScheduleError(primitive, ...) when absent.
Stmt find_block(const PrimFunc &f, const std::string &name, const std::string &primitive);
/// The loop whose variable is `loop_var`; undefined when absent.
Stmt find_loop(const PrimFunc &f, const VarNode *loop_var);
/// Loops enclosing `block`, outermost first.
std::vector<Stmt> loops_above(const PrimFunc &f, const StmtNode *block);
/// All blocks below `s` (excluding `s` itself when it is a block), in program order.
std::vector<const BlockNode *> blocks_under(const Stmt &s);
/// All non-root blocks in program order.
std::vector<const BlockNode *> all_blocks(const PrimFunc &f);
/// Index of each block in program order (for before/after questions).
int program_position(const PrimFunc &f, const BlockNode *block);

/// Replaces `target` by `replacement` (undefined = remove) everywhere under `root`.
Stmt replace_stmt(const Stmt &root, const StmtNode *target, const Stmt &replacement);
PrimFunc with_body(const PrimFunc &f, Stmt body);
/// Adds/removes a buffer in the root block's allocations.
PrimFunc add_root_alloc(const PrimFunc &f, const Buffer &b);
PrimFunc remove_root_alloc(const PrimFunc &f, const Buffer &b);

/// The topmost statement that contains `block` and nothing else (the block itself or its
/// chain of single-child loops): what moves when the block moves.
Stmt exclusive_subtree(const PrimFunc &f, const StmtNode *block);
/// The child of the root block's body that contains `node`.
Stmt root_level_stmt(const PrimFunc &f, const StmtNode *node);

struct Access {
  Buffer buffer;
  std::vector<Expr> indices;  // in terms of the block's iterators
};
/// Loads of a block (init and body), in order of appearance.
std::vector<Access> block_reads(const BlockNode *block);
/// Stores of a block (init and body).
std::vector<Access> block_writes(const BlockNode *block);
/// Distinct buffers, first appearance first.
std::vector<Buffer> distinct_buffers(const std::vector<Access> &accesses);
bool reads_buffer(const BlockNode *block, const BufferNode *b);
bool writes_buffer(const BlockNode *block, const BufferNode *b);
bool is_param(const PrimFunc &f, const BufferNode *b);

/// A loop bound to threads of a GPU block (threadIdx.*, vthread.*), not to blocks.
bool is_thread_loop(const ForNode *loop);

/// A box of a buffer: per dimension a start (in terms of loops at or above the loop it
/// was computed for) and a constant extent.
struct Region {
  std::vector<Expr> min;
  std::vector<int64_t> extent;
};
/// The part of `buffer` that `blocks` access (loads when `reads`, stores when `writes`)
/// during one iteration of `loop`, relaxing every loop below it (and, for a shared buffer, the thread loops above it).
/// Extents are constant upper bounds, clipped to the buffer (a clipped dimension starts at 0). Throws
/// ScheduleError(primitive, ...) when an index cannot be bounded.
Region region_under_loop(const PrimFunc &f, const Buffer &buffer, const std::vector<const BlockNode *> &blocks,
                         const ForNode *loop, bool reads, bool writes, const std::string &primitive);
/// region_under_loop for passes that ask: nullopt when an index cannot be bounded.
std::optional<Region> bounded_region_under_loop(const PrimFunc &f, const Buffer &buffer,
                                                const std::vector<const BlockNode *> &blocks, const ForNode *loop,
                                                bool reads, bool writes);

/// Simplifies every index, binding and predicate using the loop and iterator ranges
/// in scope.
PrimFunc simplify_func(const PrimFunc &f);
/// Applies `rewrite` to each statement directly under the root block and simplifies
/// (as simplify_func) those it changed; an undefined result removes the statement.
/// For primitives that change a few nests of a program whose others stay as the last
/// primitive left them (simplified): a long program is then not walked again per call.
PrimFunc rewrite_root_level(const PrimFunc &f, const std::function<Stmt(const Stmt &)> &rewrite);

/// Unique names for new loop variables, blocks and buffers.
std::string fresh_block_name(const PrimFunc &f, const std::string &base);
std::string fresh_buffer_name(const PrimFunc &f, const std::string &base);

}  // namespace sched
}  // namespace kiln::ir
