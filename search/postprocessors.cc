// Postprocessors for CPUs:
//   RewriteParallelVectorizeUnroll  the annotations of ParallelVectorizeUnroll become
//                                   a fused parallel outer loop, vectorized innermost
//                                   loops and an auto-unroll pragma
//   RejectPoorRegisterTiles         rejects register tiles that cannot stay in registers
//                                   or leave vector lanes idle
//   RejectSerialNests               rejects programs whose large nests lost their
//                                   parallel loop (a producer placed above it)
//   VerifyCpu                       rejects programs CPU code generation cannot run
#include "ir/annotations.h"
#include "ir/functor.h"
#include "ir/gpu_lower.h"
#include "search/block_info.h"
#include "search/components.h"

namespace kiln::search {
namespace {

using ir::LoopRV;
using ir::Schedule;

int64_t annotation(const ir::BlockNode *b, const char *key, int64_t fallback) {
  auto it = b->annotations.find(key);
  return it == b->annotations.end() ? fallback : it->second;
}

class RewriteParallelVectorizeUnroll : public Postprocessor {
 public:
  explicit RewriteParallelVectorizeUnroll(const Target &target) : lanes_(vector_lanes(target)) {}
  std::string name() const override { return "rewrite_parallel_vectorize_unroll"; }

  bool apply(Schedule &sch) const override {
    for (const std::string &name : sch.block_names()) {
      ir::NodeRef<ir::BlockNode> b = find_block(sch, name);
      if (!b) continue;
      // Read everything first: each primitive below rebuilds the program (and `b`).
      int64_t max_parallel = annotation(b.get(), ir::annotation::kParallelExtent, 0);
      int64_t max_vector = annotation(b.get(), ir::annotation::kVectorizeExtent, 64);
      int64_t unroll = annotation(b.get(), ir::annotation::kUnrollStep, 0);
      parallelize(sch, name, max_parallel);
      vectorize(sch, name, max_vector, lanes_);
      if (unroll > 0) {
        std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
        if (!loops.empty()) sch.annotate(loops.front(), ir::annotation::kAutoUnrollMaxStep, unroll);
      }
    }
    return true;
  }

 private:
  // Fuses the leading spatial loops of a root-level nest, up to `max_extent`
  // iterations (at least the first loop longer than 1), and runs them in parallel.
  static void parallelize(Schedule &sch, const std::string &name, int64_t max_extent) {
    if (max_extent <= 0) return;
    std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
    if (loops.empty()) return;
    ir::NodeRef<ir::ForNode> first = sch.loop(loops[0]);
    ir::Stmt top = ir::sched::root_level_stmt(sch.func(), first.get());
    if (top.get() != first.get() || first->for_kind != ir::ForKind::kSerial) return;
    std::vector<LoopKind> kinds = loop_kinds(sch, name);
    std::vector<LoopRV> prefix;
    int64_t product = 1;
    for (size_t i = 0; i < loops.size(); ++i) {
      ir::NodeRef<ir::ForNode> l = sch.loop(loops[i]);
      if (kinds[i] != LoopKind::kSpatial || l->for_kind != ir::ForKind::kSerial) break;
      if (i > 0 && sch.loop(loops[i - 1])->body.get() != l.get()) break;
      // Loops of extent 1 (a batch of one) do not count as the first: behind them the
      // next loop joins whatever its extent, or an NCHW epilogue's 1 x 256 channel
      // loops would stay serial under any limit below 256.
      if (product > 1 && product * l->extent > max_extent) break;
      prefix.push_back(loops[i]);
      product *= l->extent;
    }
    if (prefix.empty() || product < 2) return;
    // Where another block under these loops reduces over them, they stay serial.
    Schedule trial = sch;
    std::optional<LoopRV> fused = prefix.size() > 1 ? trial.try_fuse(prefix) : prefix[0];
    if (fused && trial.try_parallel(*fused)) sch = trial;
  }

  // Vectorizes the innermost loop when it is spatial and short enough. A longer one (an
  // element-wise epilogue's 56-wide rows) is split, when its extent allows, into an
  // inner loop of whole vectors within the limit, and that is vectorized: left scalar,
  // such a pass over the output cost as much as a depthwise convolution itself.
  static void vectorize(Schedule &sch, const std::string &name, int64_t max_extent, int64_t lanes) {
    std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
    if (loops.empty()) return;
    ir::NodeRef<ir::ForNode> inner = sch.loop(loops.back());
    std::vector<LoopKind> kinds = loop_kinds(sch, name);
    int64_t limit = std::min<int64_t>(max_extent, 64);
    if (kinds.back() != LoopKind::kSpatial || inner->for_kind != ir::ForKind::kSerial || inner->extent < 2) return;
    if (inner->body.as<ir::BlockNode>() == nullptr) return;  // only a block directly inside
    int64_t width = inner->extent;
    if (width > limit) {
      width = 0;
      for (int64_t d = limit - limit % lanes; d >= lanes && width == 0; d -= lanes)
        if (inner->extent % d == 0) width = d;
      if (width == 0) return;
    }
    Schedule trial = sch;
    std::optional<LoopRV> vector_loop = loops.back();
    if (width < inner->extent) {
      std::optional<std::vector<LoopRV>> parts = trial.try_split(*vector_loop, {int64_t{-1}, width});
      vector_loop = parts ? std::optional<LoopRV>(parts->back()) : std::nullopt;
    }
    if (vector_loop && trial.try_vectorize(*vector_loop)) sch = trial;
  }

  int64_t lanes_;
};

// A multi-level tiling's accumulator (its S2 x S3 tile: the spatial loops from S2 on) is only fast while it stays in
// vector registers: past the register file every FMA spills. And when the innermost spatial extent allows it, the
// vectorized innermost tile is a whole number of vector registers. Rejecting the rest
// at sampling time costs a replay (~1 ms); measuring it costs a build and a run.
class RejectPoorRegisterTiles : public Postprocessor {
 public:
  explicit RejectPoorRegisterTiles(const Target &target)
      : lanes_(vector_lanes(target)), max_tile_elements_(accumulator_registers(target) * lanes_) {}
  std::string name() const override { return "reject_poor_register_tiles"; }
  bool apply(Schedule &sch) const override {
    for (const std::string &name : sch.block_names()) {
      ir::NodeRef<ir::BlockNode> b = find_block(sch, name);
      int64_t kind = b ? annotation(b.get(), ir::annotation::kRegisterTile, 0) : 0;
      if (kind == 0) continue;
      std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
      std::vector<LoopKind> kinds = loop_kinds(sch, name);
      // The rule records where S2 starts: a reduction loop of extent 1 (R0 = 1) would
      // otherwise hide where the accumulated tile begins.
      int64_t tile = 1;
      for (size_t i = static_cast<size_t>(annotation(b.get(), ir::annotation::kRegisterTileLoop, 0)); i < loops.size();
           ++i)
        if (kinds[i] == LoopKind::kSpatial) tile *= sch.loop(loops[i])->extent;
      if (kind == static_cast<int64_t>(ir::annotation::RegisterTile::kAccumulator) && tile > max_tile_elements_)
        return false;
      if (!producer_outside_tile(sch, b.get())) return false;
      if (!loops.empty() && kinds.back() == LoopKind::kSpatial &&
          whole_vectors_possible(b.get(), sch.loop(loops.back())->loop_var.get()) &&
          sch.loop(loops.back())->extent % lanes_ != 0)
        return false;
    }
    return true;
  }

 private:
  // A producer computed inside the tile (zero padding placed at an S3 loop) splits the
  // nest above the vector loop: nothing is vectorized and the panel keeps its layout,
  // a program hundreds of times slower (seconds per call for a 3x3 convolution).
  static bool producer_outside_tile(const Schedule &sch, const ir::BlockNode *b) {
    auto begin = static_cast<size_t>(annotation(b, ir::annotation::kRegisterTileLoop, 0));
    std::vector<ir::Stmt> loops = ir::sched::loops_above(sch.func(), b);
    return begin >= loops.size() || ir::sched::blocks_under(loops[begin]).size() == 1;
  }
  // Registers an accumulator may take. With 16 (AVX2), all but two: the operand vector
  // and the broadcast of the inner product are all a tile needs besides, and images 7, 14
  // or 28 wide only tile into 7 or 14 registers (8 independent FMA chains keep two
  // 4-cycle pipes busy, 7 leave an eighth idle): the 14-register tile measured faster on
  // Zen 3. With 32 (AVX-512, AArch64), three quarters, as tuned before; not re-measured.
  // The spatial iterator the innermost loop drives has a multiple of the lane count
  // among its divisors up to the tiling's innermost cap (32 or 64).
  bool whole_vectors_possible(const ir::BlockNode *b, const ir::VarNode *innermost) const {
    int64_t extent = 0;
    for (size_t k = 0; k < b->iter_vars.size(); ++k)
      if (b->iter_vars[k].kind == ir::IterKind::kSpatial && ir::uses_var(b->iter_values[k], innermost))
        extent = b->iter_vars[k].extent;
    for (int64_t d = lanes_; d <= std::min<int64_t>(extent, 4 * lanes_); d += lanes_)
      if (extent % d == 0) return true;
    return false;
  }

  int64_t lanes_, max_tile_elements_;
};

// A producer computed at an outer loop of its consumer splits the nest there, and
// only the perfectly nested loops above that point can be fused into the parallel
// loop: at an extent-1 loop the whole nest runs on one core. Such programs are slower
// by the core count by construction; measuring them teaches nothing. Nests that are
// serial for other reasons (reductions outermost, small work) are left alone.
class RejectSerialNests : public Postprocessor {
 public:
  explicit RejectSerialNests(const Target &target) : cores_(std::max(1, target.num_cores)) {}
  std::string name() const override { return "reject_serial_nests"; }
  bool apply(Schedule &sch) const override {
    if (cores_ < 2) return true;
    for (const std::string &name : sch.block_names()) {
      ir::NodeRef<ir::BlockNode> b = find_block(sch, name);
      if (!b || annotation(b.get(), ir::annotation::kParallelExtent, 0) == 0 || spatial_size(b.get()) < kLargeNest)
        continue;
      std::vector<ir::Stmt> loops = ir::sched::loops_above(sch.func(), b.get());
      std::vector<LoopKind> kinds = loop_kinds(sch, name);
      int64_t prefix = 1;
      for (size_t i = 0; i < loops.size(); ++i) {
        const auto *l = loops[i].as<ir::ForNode>();
        if (l->for_kind == ir::ForKind::kParallel || kinds[i] != LoopKind::kSpatial) break;
        prefix *= l->extent;
        bool split_here = i + 1 < loops.size() && l->body.get() != loops[i + 1].get();
        if (split_here && prefix < cores_) return false;
        if (split_here) break;
      }
    }
    return true;
  }

 private:
  static constexpr int64_t kLargeNest = 4096;  // below this a serial nest may well win
  int cores_;
};

class VerifyCpu : public Postprocessor {
 public:
  std::string name() const override { return "verify_cpu"; }
  bool apply(Schedule &sch) const override {
    bool ok = true;
    ir::for_each_stmt(sch.func().body, [&](const ir::Stmt &s) {
      if (const auto *l = s.as<ir::ForNode>(); l && l->for_kind == ir::ForKind::kThreadBinding) ok = false;
    });
    return ok;
  }
};

// The cooperative copies GpuMultiLevelTiling asked for: a shared-memory copy's own
// loops fused and spread over the threads of its thread block (the threadIdx.x loop
// above it gives their number), each thread copying `vector` neighbouring elements
// per step where the copy's length allows, else one.
// A block's sampled unroll depth as the pragma the code generator reads, on the
// outermost loop of the block that runs inside one thread: below its last bound loop
// (the pragma on a bound loop would be lost with the loop).
class RewriteGpuUnroll : public Postprocessor {
 public:
  std::string name() const override { return "rewrite_gpu_unroll"; }
  bool apply(Schedule &sch) const override {
    for (const std::string &name : sch.block_names()) {
      ir::NodeRef<ir::BlockNode> b = find_block(sch, name);
      if (!b) continue;
      int64_t unroll = annotation(b.get(), ir::annotation::kUnrollStep, 0);
      if (unroll <= 0) continue;
      std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
      size_t first_serial = 0;
      for (size_t i = 0; i < loops.size(); ++i)
        if (sch.loop(loops[i])->for_kind == ir::ForKind::kThreadBinding) first_serial = i + 1;
      if (first_serial < loops.size() && sch.loop(loops[first_serial])->for_kind == ir::ForKind::kSerial)
        sch.annotate(loops[first_serial], ir::annotation::kAutoUnrollMaxStep, unroll);
    }
    return true;
  }
};

class RewriteCooperativeFetch : public Postprocessor {
 public:
  std::string name() const override { return "rewrite_cooperative_fetch"; }
  bool apply(Schedule &sch) const override {
    for (const std::string &name : sch.block_names()) {
      ir::NodeRef<ir::BlockNode> b = find_block(sch, name);
      if (!b) continue;
      int64_t vector = annotation(b.get(), ir::annotation::kCooperativeFetch, 0);
      auto level = static_cast<size_t>(annotation(b.get(), ir::annotation::kFetchLevel, 0));
      if (vector == 0) continue;
      std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
      int64_t threads = 0;
      for (size_t i = 0; i < std::min(level, loops.size()); ++i) {
        ir::NodeRef<ir::ForNode> loop = sch.loop(loops[i]);
        if (loop->for_kind == ir::ForKind::kThreadBinding && loop->thread_tag == "threadIdx.x") threads = loop->extent;
      }
      if (threads == 0 || level >= loops.size()) return false;
      std::vector<LoopRV> own(loops.begin() + static_cast<std::ptrdiff_t>(level), loops.end());
      LoopRV fused = fuse_loops(sch, own);
      int64_t extent = sch.loop(fused)->extent;
      if (extent % (threads * vector) != 0) vector = 1;
      std::vector<ir::Factor> factors = {int64_t{-1}, threads};
      if (vector > 1) factors.push_back(vector);
      std::vector<LoopRV> parts = sch.split(fused, factors);
      sch.bind(parts[1], "threadIdx.x");
      if (vector > 1) sch.vectorize(parts[2]);
    }
    return true;
  }
};

class VerifyGpu : public Postprocessor {
 public:
  explicit VerifyGpu(const Target &target)
      : limits_(ir::GpuLimits::of(target.max_threads_per_block, target.max_shared_memory_bytes,
                                  target.max_registers_per_thread)) {}
  std::string name() const override { return "verify_gpu"; }
  bool apply(Schedule &sch) const override {
    try {
      ir::lower_for_gpu(sch.func(), limits_);
      return true;
    } catch (const ir::GpuLoweringError &) {
      return false;
    }
  }

 private:
  ir::GpuLimits limits_;
};

}  // namespace

std::shared_ptr<const Postprocessor> verify_gpu(const Target &target) { return std::make_shared<VerifyGpu>(target); }
std::shared_ptr<const Postprocessor> rewrite_gpu_unroll() { return std::make_shared<RewriteGpuUnroll>(); }

std::shared_ptr<const Postprocessor> rewrite_cooperative_fetch() { return std::make_shared<RewriteCooperativeFetch>(); }

std::shared_ptr<const Postprocessor> reject_poor_register_tiles(const Target &target) {
  return std::make_shared<RejectPoorRegisterTiles>(target);
}
std::shared_ptr<const Postprocessor> rewrite_parallel_vectorize_unroll(const Target &target) {
  return std::make_shared<RewriteParallelVectorizeUnroll>(target);
}
std::shared_ptr<const Postprocessor> reject_serial_nests(const Target &target) {
  return std::make_shared<RejectSerialNests>(target);
}
std::shared_ptr<const Postprocessor> verify_cpu() { return std::make_shared<VerifyCpu>(); }

}  // namespace kiln::search
