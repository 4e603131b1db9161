#include "tests/common/gpu_schedules.h"

#include <stdexcept>

namespace kiln::test_support {

using ir::BlockRV;
using ir::Factor;
using ir::LoopRV;

namespace {

// Fuses the copy loops of a cache block below `level` loops, splits them over the
// block's threads (`threads` from the outermost axis bound to threadIdx.z or .y down
// to threadIdx.x) and vectorizes the innermost elements.
void cooperative_fetch(ir::Schedule &sch, const BlockRV &copy, size_t level, const std::vector<int64_t> &threads,
                       int64_t vector) {
  static const char *const kAxes[] = {"threadIdx.x", "threadIdx.y", "threadIdx.z"};
  std::vector<LoopRV> loops = sch.get_loops(copy);
  std::vector<LoopRV> inner(loops.begin() + static_cast<long>(level), loops.end());
  LoopRV fused = inner.size() == 1 ? inner[0] : sch.fuse(inner);
  std::vector<Factor> factors = {int64_t{-1}};
  factors.insert(factors.end(), threads.begin(), threads.end());
  if (vector > 1) factors.push_back(vector);
  std::vector<LoopRV> parts = sch.split(fused, factors);
  for (size_t i = 0; i < threads.size(); ++i) sch.bind(parts[1 + i], kAxes[threads.size() - 1 - i]);
  if (vector > 1) sch.vectorize(parts[1 + threads.size()]);
}

}  // namespace

void schedule_gemm_shared_tiles(ir::Schedule &sch, const std::string &block, const GemmTiles &t) {
  if (t.block_m % t.thread_m || t.block_n % t.thread_n)
    throw std::invalid_argument("thread tiles must divide the block tiles");
  BlockRV c = sch.get_block(block);
  BlockRV write_back = sch.cache_write(c, 0, "local");
  std::vector<LoopRV> l = sch.get_loops(c);  // i j k
  int64_t threads_y = t.block_m / t.thread_m, threads_x = t.block_n / t.thread_n;
  std::vector<LoopRV> i = sch.split(l[0], {int64_t{-1}, threads_y, t.thread_m});
  std::vector<LoopRV> j = sch.split(l[1], {int64_t{-1}, threads_x, t.thread_n});
  std::vector<LoopRV> k = sch.split(l[2], {int64_t{-1}, t.block_k});
  sch.reorder({i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]});
  sch.bind(i[0], "blockIdx.y");
  sch.bind(j[0], "blockIdx.x");
  sch.bind(i[1], "threadIdx.y");
  sch.bind(j[1], "threadIdx.x");
  sch.reverse_compute_at(write_back, j[1]);
  // C_local is read first by the update, then A and B.
  BlockRV a_shared = sch.cache_read(c, 1, "shared");
  BlockRV b_shared = sch.cache_read(c, 2, "shared");
  sch.compute_at(a_shared, k[0]);
  sch.compute_at(b_shared, k[0]);
  // Below k[0]: blockIdx.y, blockIdx.x, threadIdx.y, threadIdx.x, k0 = 5 loops.
  cooperative_fetch(sch, a_shared, 5, {threads_y, threads_x}, t.fetch_vector);
  cooperative_fetch(sch, b_shared, 5, {threads_y, threads_x}, t.fetch_vector);
  sch.unroll(k[1]);
  sch.unroll(i[2]);
  sch.unroll(j[2]);
}

void schedule_conv2d_shared_tiles(ir::Schedule &sch, const ConvTiles &t) {
  BlockRV conv = sch.get_block("conv2d");
  BlockRV write_back = sch.cache_write(conv, 0, "local");
  std::vector<LoopRV> l = sch.get_loops(conv);  // n k oh ow rc ry rx
  std::vector<LoopRV> k = sch.split(l[1], {int64_t{-1}, t.oc_threads, t.oc_per_thread});
  std::vector<LoopRV> oh = sch.split(l[2], {int64_t{-1}, t.oh_threads, t.oh_per_thread});
  std::vector<LoopRV> ow = sch.split(l[3], {int64_t{-1}, t.ow_threads});
  std::vector<LoopRV> rc = sch.split(l[4], {int64_t{-1}, t.rc_slice});
  sch.reorder({l[0], k[0], oh[0], ow[0], k[1], oh[1], ow[1], rc[0], rc[1], l[5], l[6], k[2], oh[2]});
  LoopRV tiles = sch.fuse({l[0], k[0], oh[0], ow[0]});
  sch.bind(tiles, "blockIdx.x");
  sch.bind(k[1], "threadIdx.z");
  sch.bind(oh[1], "threadIdx.y");
  sch.bind(ow[1], "threadIdx.x");
  sch.reverse_compute_at(write_back, ow[1]);
  // The padded input's window and the weights of one slice of input channels; the
  // padding is computed while copying.
  BlockRV window = sch.cache_read(conv, 1, "shared");
  BlockRV weights = sch.cache_read(conv, 2, "shared");
  sch.compute_at(window, rc[0]);
  sch.compute_at(weights, rc[0]);
  sch.compute_inline(sch.get_block("pad"));
  // Below rc[0]: blockIdx.x, threadIdx.z, threadIdx.y, threadIdx.x, rc0 = 5 loops.
  for (const BlockRV &copy : {window, weights})
    cooperative_fetch(sch, copy, 5, {t.oc_threads, t.oh_threads, t.ow_threads}, 1);
  sch.unroll(k[2]);
  sch.unroll(oh[2]);
}

void schedule_softmax_rows(ir::Schedule &sch, int64_t threads) {
  BlockRV norm = sch.get_block("softmax_norm");
  std::vector<LoopRV> l = sch.get_loops(norm);  // row, col
  std::vector<LoopRV> cols = sch.split(l[1], {int64_t{-1}, threads});
  sch.reorder({cols[1], cols[0]});
  sch.bind(l[0], "blockIdx.x");
  sch.bind(cols[1], "threadIdx.x");
  for (const char *name : {"softmax_expsum", "softmax_max"}) {
    BlockRV stat = sch.get_block(name);
    sch.compute_at(stat, l[0]);
    std::vector<LoopRV> s = sch.get_loops(stat);  // row, its kept axis (1), the reduction
    std::vector<LoopRV> r = sch.split(s.back(), {int64_t{-1}, threads});
    sch.reorder({r[1], r[0]});
    sch.bind(r[1], "threadIdx.x");
  }
}

void schedule_elementwise(ir::Schedule &sch, const std::string &block, int64_t threads) {
  BlockRV b = sch.get_block(block);
  std::vector<LoopRV> loops = sch.get_loops(b);
  LoopRV fused = loops.size() == 1 ? loops[0] : sch.fuse(loops);
  std::vector<LoopRV> parts = sch.split(fused, {int64_t{-1}, threads});
  sch.bind(parts[0], "blockIdx.x");
  sch.bind(parts[1], "threadIdx.x");
}

}  // namespace kiln::test_support
