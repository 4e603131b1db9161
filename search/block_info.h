// Facts about blocks that the rules and postprocessors decide on.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ir/schedule/schedule.h"
#include "target/backend.h"
#include "target/target.h"

namespace kiln::search {

/// float32 lanes of one vector register of the target (at least 4).
inline int64_t vector_lanes(const Target &target) { return std::max(4, target.vector_width_bits / 32); }
/// Vector registers of the target's file: 16 on AVX2, 32 on AVX-512 and AArch64.
inline int64_t vector_registers(const Target &target) { return target.backend().vector_registers(target); }
/// Vector registers a register tile may hold as accumulators: the file (16 on AVX2, 32
/// on AVX-512 and AArch64) less those the loads and broadcasts of each step need.
inline int64_t accumulator_registers(const Target &target) { return target.backend().accumulator_registers(target); }

/// Empty when the block no longer exists (inlined). The handle keeps the node alive
/// across later primitives (it then describes the program of this call).
ir::NodeRef<ir::BlockNode> find_block(const ir::Schedule &sch, const std::string &name);
bool has_reduction(const ir::BlockNode *b);
/// Spatial only, one store, no init: a candidate for inlining or for fusing as an epilogue.
bool is_elementwise(const ir::BlockNode *b);
/// Element-wise and its value is select(condition, load, constant): zero padding.
/// Inlining it puts the condition into the consumer's innermost loop; materializing it
/// near the consumer keeps that loop branch-free. The search tries both.
bool is_padding(const ir::BlockNode *b);
/// What a loop above a block drives: spatial iterators (also said of a loop that drives
/// nothing), reduction iterators, or both.
enum class LoopKind { kSpatial, kReduce, kMixed };
/// The kind of each loop above the block, outermost first.
std::vector<LoopKind> loop_kinds(const ir::Schedule &sch, const std::string &block);
/// For a GPU: fuses the block's outer loops that drive spatial iterators only, splits
/// them into blocks of `threads` threads and binds them to blockIdx.x and threadIdx.x;
/// the rest (its reduction) runs serially in each thread. False, changing nothing, when
/// the block has no such loop or a loop of it is bound already.
bool bind_spatial_loops(ir::Schedule &sch, const std::string &block, const ir::Factor &threads);
/// The loops fused into one (adjacent, outermost first); a single loop is itself.
ir::LoopRV fuse_loops(ir::Schedule &sch, const std::vector<ir::LoopRV> &loops);
/// Blocks that read what `block` writes.
std::vector<std::string> consumers_of(const ir::Schedule &sch, const std::string &block);
/// Blocks that write what `block` reads (its own accumulator aside).
std::vector<std::string> producers_of(const ir::Schedule &sch, const std::string &block);
/// A table written out as selects: every select of the block compares an iterator (or its
/// quotient or remainder by a constant) with a constant, as the Winograd transforms do.
/// For each such iterator (by index): the period to unroll it over, the remainder's
/// divisor or else its whole extent. Empty when the block has no such select, selects on
/// anything else, or the positions would unroll to more than 64 copies.
std::map<size_t, int64_t> table_positions(const ir::BlockNode *b);
/// Some input is read again along a spatial iterator that does not index it (a GEMM's A
/// along j, a convolution's weights along the image): staging tiles of it in shared
/// memory pays. A reduction of each row to one value (softmax's max and sum, a layer
/// norm's mean, pooling) reads every input element once: nothing to share.
bool reads_an_input_again(const ir::BlockNode *b);
/// Product of the extents of the block's spatial iterators.
int64_t spatial_size(const ir::BlockNode *b);
/// Product of the extents of the block's reduction iterators.
int64_t reduction_size(const ir::BlockNode *b);

}  // namespace kiln::search
