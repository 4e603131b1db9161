#include "tests/costmodel/gemm_schedules.h"

#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "te/te.h"

namespace kiln::costmodel::testing {

ir::PrimFunc tiled_gemm(int64_t m, int64_t n, int64_t k, int64_t tile, bool vectorize, bool parallel, int64_t tile_i) {
  ops::Workload w = ops::Workload::single("matmul", {{{m, k}}, {{k, n}}});
  ir::Schedule sch(te::lower(w.build_dag(), "matmul"));
  ir::BlockRV block = sch.get_block("matmul");
  std::vector<ir::LoopRV> loops = sch.get_loops(block);
  std::vector<ir::LoopRV> j = sch.split(loops[1], {ir::Factor(int64_t{-1}), ir::Factor(tile)});
  ir::LoopRV outer = loops[0];
  if (tile_i > 1) {
    std::vector<ir::LoopRV> i = sch.split(loops[0], {ir::Factor(int64_t{-1}), ir::Factor(tile_i)});
    sch.reorder({i[0], j[0], loops[2], i[1], j[1]});
    outer = i[0];
  } else {
    sch.reorder({loops[0], j[0], loops[2], j[1]});
  }
  if (vectorize) sch.vectorize(j[1]);
  if (parallel) sch.parallel(outer);
  return sch.func();
}

}  // namespace kiln::costmodel::testing
