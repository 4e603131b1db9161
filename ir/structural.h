// Structural equality and hashing of IR, up to the renaming of variables and buffers
// defined inside the compared objects (loop variables, block iterators, parameters,
// allocations). Replaying a trace on a fresh program yields a structurally equal result.
#pragma once

#include <cstdint>

#include "ir/stmt.h"

namespace kiln::ir {

bool structural_equal(const Expr &a, const Expr &b);
bool structural_equal(const Stmt &a, const Stmt &b);
bool structural_equal(const PrimFunc &a, const PrimFunc &b);

uint64_t structural_hash(const Expr &e);
uint64_t structural_hash(const Stmt &s);
uint64_t structural_hash(const PrimFunc &f);

}  // namespace kiln::ir

namespace kiln::ir {
/// Equality where every variable and buffer must be the very same object: the identity
/// the simplifier needs to combine like terms.
bool same_expr(const Expr &a, const Expr &b);
}  // namespace kiln::ir
