#include "tests/common/random_schedule.h"

#include <algorithm>

namespace kiln::test_support {

using namespace ir;  // NOLINT: test helper over the schedule API

namespace {
template <typename T>
const T &pick(std::mt19937_64 &rng, const std::vector<T> &v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

}  // namespace

std::string random_step(Schedule &sch, std::mt19937_64 &rng) {
  std::vector<std::string> blocks = sch.block_names();
  BlockRV block = sch.get_block(pick(rng, blocks));
  std::vector<LoopRV> loops = sch.get_loops(block);
  auto any_loop = [&]() -> LoopRV {
    if (loops.empty()) throw ScheduleError("test", "block has no loops");
    return pick(rng, loops);
  };
  int choice = static_cast<int>(rng() % 17);
  switch (choice) {
    case 0: {  // split with literal factors, possibly non-divisible
      LoopRV l = any_loop();
      int64_t extent = sch.loop(l)->extent;
      int64_t f = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, extent))(rng);
      if (rng() % 3 == 0) {
        sch.split(l, {Factor(int64_t{-1}), Factor(f), Factor(int64_t{2})});
      } else {
        sch.split(l, {Factor(int64_t{-1}), Factor(f)});
      }
      return "split";
    }
    case 1: {  // split by a sampled tiling, perfect or not
      LoopRV l = any_loop();
      int n = 2 + static_cast<int>(rng() % 3);
      bool perfect = rng() % 2;
      std::vector<ExprRV> tiles = perfect ? sch.sample_perfect_tile(l, n, rng() % 2 ? 4 : 0)
                                          : sch.sample_tile(l, n, rng() % 2 ? 4 : 0, rng() % 2 ? 2 : 0);
      std::vector<Factor> factors(tiles.begin(), tiles.end());
      sch.split(l, factors);
      return perfect ? "sample_perfect_tile+split" : "sample_tile+split";
    }
    case 2: {  // fuse a loop with the next one
      if (loops.size() < 2) return "none";
      size_t i = std::uniform_int_distribution<size_t>(0, loops.size() - 2)(rng);
      sch.fuse({loops[i], loops[i + 1]});
      return "fuse";
    }
    case 3: {  // reorder a random subset
      if (loops.size() < 2) return "none";
      std::vector<LoopRV> subset;
      for (const LoopRV &l : loops)
        if (rng() % 2) subset.push_back(l);
      if (subset.size() < 2) subset = loops;
      std::shuffle(subset.begin(), subset.end(), rng);
      sch.reorder(subset);
      return "reorder";
    }
    case 4:
      sch.parallel(any_loop());
      return "parallel";
    case 5:
      sch.vectorize(any_loop());
      return "vectorize";
    case 6:
      sch.unroll(any_loop());
      return "unroll";
    case 7:
      sch.bind(any_loop(), rng() % 2 ? "threadIdx.x" : "blockIdx.x");
      return "bind";
    case 8: {
      BlockRV other = sch.get_block(pick(rng, blocks));
      std::vector<LoopRV> other_loops = sch.get_loops(other);
      if (other_loops.empty()) return "none";
      sch.compute_at(block, pick(rng, other_loops));
      return "compute_at";
    }
    case 9: {
      BlockRV other = sch.get_block(pick(rng, blocks));
      std::vector<LoopRV> other_loops = sch.get_loops(other);
      if (other_loops.empty()) return "none";
      sch.reverse_compute_at(block, pick(rng, other_loops));
      return "reverse_compute_at";
    }
    case 10:
      sch.compute_inline(block);
      return "compute_inline";
    case 11:
      sch.reverse_compute_inline(block);
      return "reverse_compute_inline";
    case 12:
      sch.cache_read(block, static_cast<int>(rng() % 3), rng() % 2 ? "local" : "shared");
      return "cache_read";
    case 13:
      sch.cache_write(block, 0, "local");
      return "cache_write";
    case 14:
      sch.rfactor(any_loop(), static_cast<int>(rng() % 2));
      return "rfactor";
    case 15: {
      LoopRV at = sch.sample_compute_location(block);
      sch.compute_at(block, at);
      return "sample_compute_location+compute_at";
    }
    default: {
      ExprRV depth = sch.sample_categorical({0, 16, 64}, {0.3, 0.4, 0.3});
      sch.annotate(any_loop(), "pragma_auto_unroll_max_step", sch.value(depth));
      return "annotate";
    }
  }
}

}  // namespace kiln::test_support
