// Postprocessors for CPUs:
//   RewriteParallelVectorizeUnroll  the annotations of ParallelVectorizeUnroll become
//                                   a fused parallel outer loop, vectorized innermost
//                                   loops and an auto-unroll pragma
//   VerifyCpu                       rejects programs CPU code generation cannot run
#include "ir/functor.h"
#include "search/block_info.h"
#include "search/space.h"

namespace kiln::search {
namespace {

using ir::LoopRV;
using ir::Schedule;
using ir::ScheduleError;

int64_t annotation(const ir::BlockNode *b, const char *key, int64_t fallback) {
  auto it = b->annotations.find(key);
  return it == b->annotations.end() ? fallback : it->second;
}

class RewriteParallelVectorizeUnroll : public Postprocessor {
 public:
  std::string name() const override { return "rewrite_parallel_vectorize_unroll"; }

  bool apply(Schedule &sch) const override {
    for (const std::string &name : sch.block_names()) {
      const ir::BlockNode *b = find_block(sch, name);
      if (!b) continue;
      // Read everything first: each primitive below rebuilds the program (and `b`).
      int64_t max_parallel = annotation(b, "kiln.parallel", 0);
      int64_t max_vector = annotation(b, "kiln.vectorize", 64);
      int64_t unroll = annotation(b, "kiln.unroll", 0);
      parallelize(sch, name, max_parallel);
      vectorize(sch, name, max_vector);
      if (unroll > 0) {
        std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
        if (!loops.empty()) sch.annotate(loops.front(), "pragma_auto_unroll_max_step", unroll);
      }
    }
    return true;
  }

 private:
  // Fuses the leading spatial loops of a root-level nest, up to `max_extent`
  // iterations, and runs them in parallel.
  static void parallelize(Schedule &sch, const std::string &name, int64_t max_extent) {
    if (max_extent <= 0) return;
    std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
    if (loops.empty()) return;
    const ir::ForNode *first = sch.loop(loops[0]);
    ir::Stmt top = ir::sched::root_level_stmt(sch.func(), first);
    if (top.get() != first || first->for_kind != ir::ForKind::kSerial) return;
    std::vector<int> kinds = loop_kinds(sch, name);
    std::vector<LoopRV> prefix;
    int64_t product = 1;
    for (size_t i = 0; i < loops.size(); ++i) {
      const ir::ForNode *l = sch.loop(loops[i]);
      if (kinds[i] != kLoopSpatial || l->for_kind != ir::ForKind::kSerial) break;
      if (i > 0 && sch.loop(loops[i - 1])->body.get() != l) break;
      if (!prefix.empty() && product * l->extent > max_extent) break;
      prefix.push_back(loops[i]);
      product *= l->extent;
    }
    if (prefix.empty() || product < 2) return;
    Schedule trial = sch;
    try {
      LoopRV fused = prefix.size() > 1 ? trial.fuse(prefix) : prefix[0];
      trial.parallel(fused);
      sch = trial;
    } catch (const ScheduleError &) {
      // Another block under these loops reduces over them: stay serial.
    }
  }

  // Vectorizes the innermost loop when it is spatial and short enough.
  static void vectorize(Schedule &sch, const std::string &name, int64_t max_extent) {
    std::vector<LoopRV> loops = sch.get_loops(sch.get_block(name));
    if (loops.empty()) return;
    const ir::ForNode *inner = sch.loop(loops.back());
    std::vector<int> kinds = loop_kinds(sch, name);
    if (kinds.back() != kLoopSpatial || inner->for_kind != ir::ForKind::kSerial || inner->extent < 2 ||
        inner->extent > std::min<int64_t>(max_extent, 64))
      return;
    if (inner->body.as<ir::BlockNode>() == nullptr) return;  // only a block directly inside
    Schedule trial = sch;
    try {
      trial.vectorize(loops.back());
      sch = trial;
    } catch (const ScheduleError &) {
    }
  }
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

}  // namespace

std::vector<std::unique_ptr<Postprocessor>> default_postprocessors(const Target &) {
  std::vector<std::unique_ptr<Postprocessor>> out;
  out.push_back(std::make_unique<RewriteParallelVectorizeUnroll>());
  out.push_back(std::make_unique<VerifyCpu>());
  return out;
}

}  // namespace kiln::search
