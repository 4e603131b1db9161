#include "tests/common/packed_dense.h"

#include "ir/schedule/analysis.h"

namespace kiln::test_support {

ops::Workload dense_workload(int64_t rows, int64_t n, int64_t k, bool constant_weights) {
  ops::Workload w = ops::Workload::single("dense", {{{rows, k}, ir::DType::kFloat32}, {{n, k}, ir::DType::kFloat32}});
  w.inputs[1].constant = constant_weights;
  return w;
}

ir::Schedule packed_dense_schedule(const ir::PrimFunc &dense, int64_t panel, bool copy_under_rows) {
  ir::Schedule sch(dense);
  ir::BlockRV block = sch.get_block("dense");
  std::vector<ir::LoopRV> l = sch.get_loops(block);  // i j rk
  std::vector<ir::ExprRV> tiles = sch.sample_tile(l[1], 2, 0, 0, std::vector<int64_t>{-1, panel});
  std::vector<ir::LoopRV> cols = sch.split(l[1], {ir::Factor(tiles[0]), ir::Factor(tiles[1])});
  sch.reorder({cols[0], l[0], l[2], cols[1]});
  sch.vectorize(cols[1]);
  ir::Stmt node = ir::sched::find_block(sch.func(), "dense", "packed_dense_schedule");
  std::vector<ir::Buffer> reads = ir::sched::distinct_buffers(ir::sched::block_reads(node.as<ir::BlockNode>()));
  int weights = 0;
  while (reads.at(static_cast<size_t>(weights))->name != "in1") ++weights;
  ir::BlockRV copy = sch.cache_read(block, weights, "local");
  sch.compute_at(copy, copy_under_rows ? l[0] : cols[0]);
  return sch;
}

}  // namespace kiln::test_support
