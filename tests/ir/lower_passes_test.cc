// Lowering passes on programs the search produces: what they change and that the
// interpreter sees the same results before and after.
#include <gtest/gtest.h>

#include <random>

#include "ir/functor.h"
#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "ir/schedule/schedule.h"
#include "ir/te.h"
#include "ir/workload.h"

namespace kiln::ir {
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

  std::mt19937_64 rng(13);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, -1.0, 1.0);
  }
  EXPECT_EQ(relative_l2_error(interpret(lowered, inputs)[0], interpret(func, inputs)[0]), 0.0);
}

}  // namespace
}  // namespace kiln::ir
