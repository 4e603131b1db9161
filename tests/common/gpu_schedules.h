// Hand-written GPU schedules: what the GPU search space will sample, written out so
// that lowering, the interpreter, code generation and the GPU benchmarks have programs
// with thread bindings, shared tiles and register accumulators to work on.
#pragma once

#include <cstdint>

#include "ir/schedule/schedule.h"

namespace kiln::test_support {

/// A matrix product block's tiling: each thread block computes block_m x block_n of C
/// through block_k-wide slices of A and B staged in shared memory; each thread
/// accumulates thread_m x thread_n of them in registers.
struct GemmTiles {
  int64_t block_m = 64, block_n = 64, block_k = 8;
  int64_t thread_m = 4, thread_n = 4;
  /// Elements each thread copies per vector in the cooperative fetch (1 = scalar).
  int64_t fetch_vector = 1;
};

/// Schedules the block `block` (loops i, j, k over C[i, j] += A[i, k] * B[k, j], read
/// indices 1 and 2 for A and B) with shared-memory tiles and register accumulators:
/// blockIdx.y/x over tiles of C, threadIdx.y/x over the threads' sub-tiles, the k loop
/// split into slices copied cooperatively by all threads of the block. Extents must be
/// multiples of the tiles.
void schedule_gemm_shared_tiles(ir::Schedule &sch, const std::string &block, const GemmTiles &tiles);

/// A 2-D convolution's tiling (NCHW, stride 1, batch 1): a thread block computes
/// oc_threads * oc_per_thread output channels x oh_threads * oh_per_thread rows x
/// ow_threads columns; each thread oc_per_thread x oh_per_thread outputs of one column.
/// Input channels are staged rc_slice at a time: the padded input window and the weights
/// in shared memory.
struct ConvTiles {
  int64_t oc_threads = 8, oc_per_thread = 2;
  int64_t oh_threads = 2, oh_per_thread = 2;
  int64_t ow_threads = 14;
  int64_t rc_slice = 8;
};

/// Schedules `conv2d` (with its `pad` stage) as described by ConvTiles; blockIdx.x runs
/// over all tiles, threadIdx.z/y/x over output channels, rows and columns.
void schedule_conv2d_shared_tiles(ir::Schedule &sch, const ConvTiles &tiles);

/// Softmax over the last axis of a [rows, cols] input (blocks softmax_max,
/// softmax_expsum, softmax_norm): one thread block per row with `threads` threads along
/// x; the row's maximum and sum are cross-thread reductions (each thread reduces every
/// `threads`-th element, then the threads combine), kept in shared memory for the
/// normalization, which the same threads share.
void schedule_softmax_rows(ir::Schedule &sch, int64_t threads);

/// Binds an element-wise block's loops: all fused, split into blocks of `threads`.
void schedule_elementwise(ir::Schedule &sch, const std::string &block, int64_t threads);

}  // namespace kiln::test_support
