// Layout rewrite: constant inputs (weights) packed once, ahead of time.
//
// A tuned program packs the weights it streams (cache_read + compute_at, then
// compact_buffers sizes the panel to one tile and vector_friendly_layouts transposes it):
// every call copies each weight into panels again. When the weight is a constant of the
// program (PrimFunc::constant_params), rewrite_constant_layouts moves that copy into a
// separate prepack program that fills one buffer holding every panel, indexed by the
// loops the panel depends on, and the kernel reads its panel from there. The prepack
// runs once (the runner before timing, `kiln compile` at load) and is never timed.
#pragma once

#include <optional>
#include <vector>

#include "ir/stmt.h"

namespace kiln::ir {

struct PackedInput {
  size_t param = 0;  ///< position of the constant parameter in the kernel's parameters
  Buffer original;   ///< the weight as the workload gives it
  Buffer packed;     ///< what the kernel reads in its place: [panel loops..., panel dims...]
};

struct LayoutRewrite {
  /// Reads `packed` where the program read `original`, from the same parameter slot.
  PrimFunc kernel;
  /// Parameters (original, packed) per packed input, in `packed`'s order; it zero-fills
  /// each packed buffer (the padding of partial panels) and copies the panels in.
  /// Absent when nothing was packed.
  std::optional<PrimFunc> prepack;
  std::vector<PackedInput> packed;
};

/// Expects a program after compaction (lower_for_analysis's passes before this one). A
/// constant parameter is packed ahead of time when exactly one block reads it, that
/// block only copies it into an intermediate buffer nothing else writes, and the
/// panels together are at most four times the weight (copies that repeat across loops
/// the copy does not depend on are made once). Other programs come back unchanged.
LayoutRewrite rewrite_constant_layouts(const PrimFunc &f);

}  // namespace kiln::ir
