// Lowering passes on programs the search produces: what they change and that the
// interpreter sees the same results before and after.
#include <gtest/gtest.h>

#include <random>

#include "ir/functor.h"
#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "te/te.h"

namespace kiln::ir {

using ops::Workload;
namespace {

std::vector<int64_t> alloc_shape(const PrimFunc &f, const std::string &name) {
  std::vector<int64_t> shape;
  for_each_stmt(f.body, [&](const Stmt &s) {
    if (const auto *b = s.as<BlockNode>())
      for (const Buffer &buf : b->alloc_buffers)
        if (buf->name == name) shape = buf->shape;
  });
  return shape;
}

// The lowered program computes exactly what the unscheduled one does, on random inputs.
void expect_same_results(const te::ComputeDAG &dag, const PrimFunc &func, const PrimFunc &lowered, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, -1.0, 1.0);
  }
  EXPECT_EQ(relative_l2_error(interpret(lowered, inputs)[0], interpret(func, inputs)[0]), 0.0);
}

// The padded input of a stride-2 depthwise convolution, computed per block of output
// rows: each tile's window (9 rows for 4 output rows) becomes its own small buffer,
// even though neighbouring windows overlap and the batch and channel indices are fixed
// within the tile.
TEST(LowerPasses, OverlappingPaddedWindowsAreCompactedPerTile) {
  Workload w = Workload::single("conv2d", {{{1, 4, 16, 16}, DType::kFloat32}, {{4, 1, 3, 3}, DType::kFloat32}},
                                {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"groups", 4}});
  te::ComputeDAG dag = w.build_dag();
  PrimFunc func = te::lower(dag, "dw_s2");
  Schedule sch(func);
  std::vector<LoopRV> l = sch.get_loops(sch.get_block("conv2d"));  // n k oh ow | ry rx
  ASSERT_EQ(l.size(), 6u);
  std::vector<LoopRV> rows = sch.split(l[2], {int64_t{-1}, int64_t{4}});
  sch.compute_at(sch.get_block("pad"), rows[0]);
  PrimFunc lowered = lower_for_codegen(sch.func());
  EXPECT_EQ(alloc_shape(lowered, "pad"), (std::vector<int64_t>{1, 1, 9, 17})) << to_string(lowered);

  expect_same_results(dag, func, lowered, 13);
}

// 37 rows in three levels of 3 x 4 x 4 (48, the last outer tile partial): full tiles
// run without the predicate at each level; the partial tile is split again one level
// further in, and its empty part (rows 37..47) is skipped before any loop runs.
TEST(LowerPasses, PartialTilesAreVersionedLevelByLevel) {
  Workload w = Workload::single("relu", {{{37, 8}, DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  PrimFunc func = te::lower(dag, "relu");
  Schedule sch(func);
  std::vector<LoopRV> l = sch.get_loops(sch.get_block("relu"));  // i j
  std::vector<ExprRV> tiles = sch.sample_tile(l[0], 3, 0, 0, std::vector<int64_t>{-1, 4, 4});
  sch.split(l[0], {Factor(tiles[0]), Factor(tiles[1]), Factor(tiles[2])});
  PrimFunc lowered = lower_for_codegen(sch.func());
  std::vector<std::string> conditions;
  int guarded = 0;
  for_each_stmt(lowered.body, [&](const Stmt &s) {
    if (const auto *i = s.as<IfThenElseNode>()) conditions.push_back(to_string(i->cond));
    if (const auto *b = s.as<BlockNode>()) guarded += !is_const_int(b->predicate, 1);
  });
  // i0: full (some row of every outer tile is valid: no "any" check); i1, in the
  // partial outer tile: full, any; i2: the check moves out of j.
  EXPECT_EQ(conditions.size(), 4u) << to_string(lowered);
  EXPECT_EQ(guarded, 0) << "every predicate became a branch outside the loops it does not use\n" << to_string(lowered);
  int analysis_branches = 0;
  for_each_stmt(lower_for_analysis(sch.func()).body,
                [&](const Stmt &s) { analysis_branches += s.as<IfThenElseNode>() != nullptr; });
  EXPECT_EQ(analysis_branches, 0) << "the cost model sees one copy of the nest";

  expect_same_results(dag, func, lowered, 3);
}

// An accumulator written back per row tile, with 37 rows in tiles of 8: its writers in
// the partial tile carry `row < 37`, which only keeps them inside the buffer, so the
// accumulator still shrinks to one tile (and stays in registers) rather than staying
// whole at the root.
TEST(LowerPasses, AccumulatorsOfPartialTilesAreCompacted) {
  Workload w = Workload::single("dense", {{{37, 48}, DType::kFloat32}, {{67, 48}, DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  PrimFunc func = te::lower(dag, "dense");
  Schedule sch(func);
  BlockRV dense = sch.get_block("dense");
  std::vector<LoopRV> l = sch.get_loops(dense);  // i j | k
  std::vector<ExprRV> tiles = sch.sample_tile(l[0], 2, 0, 0, std::vector<int64_t>{-1, 8});
  std::vector<LoopRV> rows = sch.split(l[0], {Factor(tiles[0]), Factor(tiles[1])});
  BlockRV acc = sch.cache_write(dense, 0, "local");
  sch.reverse_compute_at(acc, rows[0]);
  PrimFunc lowered = lower_for_codegen(sch.func());
  EXPECT_EQ(alloc_shape(lowered, "dense_local"), (std::vector<int64_t>{8, 67})) << to_string(lowered);

  expect_same_results(dag, func, lowered, 17);
}

}  // namespace
}  // namespace kiln::ir
