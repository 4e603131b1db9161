// IR-to-IR lowering passes run before code generation. Each keeps the program's
// result unchanged (the interpreter checks it in tests).
#pragma once

#include "ir/stmt.h"

namespace kiln::ir {

/// Moves each reduction block's init out of its reduction loops: the init becomes its
/// own block, in a copy of the spatial loops below the outermost reduction loop, placed
/// right before that loop. Compiled code then has no "first iteration?" test inside
/// the hot loop. Blocks whose loops mix spatial and reduction iterators keep their init.
PrimFunc decompose_reductions(const PrimFunc &f);

}  // namespace kiln::ir
