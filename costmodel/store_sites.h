// First pass of feature extraction: walks a lowered program once and records, for
// every buffer store, what the feature rows need: the enclosing loops, the operations
// one execution performs, and the buffers it touches with indices rewritten in terms
// of loop variables (block iterators substituted by their bindings).

#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "costmodel/feature_layout.h"
#include "ir/stmt.h"

namespace kiln::costmodel {

struct LoopInfo {
  ir::Var var;
  int64_t extent = 1;
  ir::ForKind kind = ir::ForKind::kSerial;
  std::string thread_tag;
};

enum class AccessType { kRead, kWrite, kReadWrite };

/// Every access of one store to one buffer.
struct BufferAccess {
  ir::Buffer buffer;
  AccessType type = AccessType::kRead;
  std::vector<std::vector<ir::Expr>> indices;  ///< one index list per access, in loop variables
};

/// Operation counts of one execution, in the order of layout::kNumOpCounts.
using OpCounts = std::array<double, layout::kNumOpCounts>;

struct StoreSite {
  ir::Buffer buffer;
  std::vector<int> loops;              ///< ids into StoreSites::loops, outermost first
  std::vector<BufferAccess> accesses;  ///< one per distinct buffer; the stored one first
  OpCounts ops{};
  /// Loop variables that drive a reduction iterator of an enclosing block.
  std::unordered_set<const ir::VarNode *> reduce_vars;
  /// Number of enclosing loops outside the allocation of the stored buffer; -1 when
  /// it is a function parameter.
  int alloc_depth = -1;
  int64_t auto_unroll_max_step = 0;
};

struct StoreSites {
  std::vector<LoopInfo> loops;
  std::vector<StoreSite> sites;
};

StoreSites collect_store_sites(const ir::PrimFunc &lowered);

}  // namespace kiln::costmodel
