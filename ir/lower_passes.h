// IR-to-IR lowering passes run before code generation. Each keeps the program's
// result unchanged (the interpreter checks it in tests).
#pragma once

#include "ir/layout_rewrite.h"
#include "ir/stmt.h"

namespace kiln::ir {

/// Moves each reduction block's init out of its reduction loops: the init becomes its
/// own block, in a copy of the spatial loops below the outermost reduction loop, placed
/// right before that loop. Compiled code then has no "first iteration?" test inside
/// the hot loop. Blocks whose loops mix spatial and reduction iterators keep their init.
PrimFunc decompose_reductions(const PrimFunc &f);

/// Shrinks each intermediate buffer to the region it is accessed in during one iteration
/// of the innermost loop enclosing all its accesses, and allocates it there (in an
/// allocation block wrapping the loop body). A packed cache_read of a tile then has
/// the tile's own dense layout, and per-thread copies when that loop is parallel.
/// Buffers written by a reduction whose loops reach that far keep their full size.
/// Writers may carry a partial tile's bounds predicate (`index < extent` of a
/// dimension they write): it keeps writes inside the buffer, so it does not stop
/// compaction. Writers of other forms (a copy whose loops were fused, split and bound
/// to threads, with the partial split's predicate) are run to check that they fill the
/// region exactly. A shared buffer's region spans all threads of a block (gpu_lower.h).
PrimFunc compact_buffers(const PrimFunc &f);

/// Reorders the dimensions of intermediate buffers so that vectorized loops read them
/// contiguously: when every read of a buffer inside a vectorized loop varies (across
/// lanes) in one dimension only, and it is not the last, that dimension moves last.
/// A packed panel of a transposed weight (a dense layer's W[n, k] read along n) is
/// then stored [k, n]: the copy scatters once per panel, the hot loop loads vectors.
/// Intermediate buffers are private to the program, so this never changes its result.
PrimFunc vector_friendly_layouts(const PrimFunc &f);

/// Tiles that need not divide their loop (sample_tile, non-divisible splits) leave
/// predicates like `i0*16 + i1 < 197` on blocks. At each loop whose variable such a
/// conjunct `e < n` uses, the body becomes `if (max of e over the loops inside < n)
/// {body without the conjunct} else {body}`, and the else side, when every store in it
/// is guarded by the conjunct, `if (min of e < n) {body}`: full tiles run
/// predicate-free (vectorizable) code, the partial tile is split again one loop
/// further in, and the empty part of a padded tile is skipped. At most four versions
/// nest on one path (each doubles the code below it); vectorized loops are not
/// versioned (code generation masks their lanes instead).
PrimFunc version_partial_tiles(const PrimFunc &f);

/// The passes before versioning: one copy of every loop nest (what the cost model's
/// features describe; the versions' predicates count as guard operations). Constant
/// inputs packed ahead of time (rewrite_constant_layouts) leave only the kernel: the
/// features describe what is timed.
PrimFunc lower_for_analysis(const PrimFunc &f);

/// The passes code generation runs: decompose_reductions, compact_buffers,
/// vector_friendly_layouts, rewrite_constant_layouts, then version_partial_tiles on the
/// kernel. The prepack program, if any, is returned beside it.
LayoutRewrite lower_with_prepack(const PrimFunc &f);

/// The constant inputs lower_with_prepack packs ahead of time, without versioning the
/// kernel (what a record says the program expects).
std::vector<PackedInput> packed_inputs(const PrimFunc &f);

/// The kernel of lower_with_prepack.
PrimFunc lower_for_codegen(const PrimFunc &f);

}  // namespace kiln::ir
