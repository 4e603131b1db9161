// Every annotation key Kiln writes on blocks and loops. Annotations are integers
// (stmt.h); the search writes its own keys ("kiln." ...) on blocks to hand decisions from
// its rules to its postprocessors and mutators, and code generation reads the pragma
// keys on loops.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::ir::annotation {

// ---- read by code generation (on loops) --------------------------------------------------
/// This loop and the serial loops below it are unrolled where their whole subtree runs
/// at most this many innermost iterations.
inline constexpr const char *kAutoUnrollMaxStep = "pragma_auto_unroll_max_step";

// ---- the search's own (on blocks) ---------------------------------------------------------
/// Prefix of every search annotation: they never reach generated code, so two programs
/// that differ only there are the same program.
inline constexpr std::string_view kSearchPrefix = "kiln.";
/// Upper bound of the fused parallel loop's extent (sampled by the rule, applied by the
/// postprocessor, changed by a mutator).
inline constexpr const char *kParallelExtent = "kiln.parallel";
/// Upper bound of the innermost vectorized loop's extent.
inline constexpr const char *kVectorizeExtent = "kiln.vectorize";
/// Auto-unroll depth the postprocessor turns into kAutoUnrollMaxStep (sampled; 0 = none).
inline constexpr const char *kUnrollStep = "kiln.unroll";
/// A multi-level tiling's register tile (RegisterTile below), checked by a postprocessor.
inline constexpr const char *kRegisterTile = "kiln.register_tile";
/// The position among the block's loops where the register tile (S2) begins.
inline constexpr const char *kRegisterTileLoop = "kiln.register_tile_loop";

/// GPU: a shared-memory copy block filled by all threads of its thread block together;
/// the value is the elements per thread and copy (1, 2 or 4: a vector load). Applied by
/// rewrite_cooperative_fetch once the thread count is known.
inline constexpr const char *kCooperativeFetch = "kiln.cooperative_fetch";
/// GPU: how many loops above a cooperative copy belong to its consumer's nest (the copy's
/// own loops start there).
inline constexpr const char *kFetchLevel = "kiln.fetch_level";

/// Values of kRegisterTile.
enum class RegisterTile : int64_t {
  kNone = 0,
  /// The innermost tile must fill whole vectors.
  kVectors = 1,
  /// Also an accumulator kept in registers: it must fit the register file.
  kAccumulator = 2,
};

}  // namespace kiln::ir::annotation
