// The default lists per target. A new rule, postprocessor or mutator joins the search
// with one line here (or, for one run, by adding it to a SearchSpace).
#include "ir/annotations.h"
#include "search/components.h"

namespace kiln::search {

// Rules run in this order on each block, consumers first (see rules/*.cc).
RuleList default_rules(const Target &target) {
  if (target.backend().is_gpu())
    return {auto_inline_rule(), gpu_multi_level_tiling_rule(), cross_thread_reduction_rule(target),
            auto_bind_rule(target), gpu_unroll_rule()};
  return {auto_inline_rule(), multi_level_tiling_rule(target), unroll_table_axes_rule(target), compute_location_rule(),
          parallel_vectorize_unroll_rule(target)};
}

RuleList untuned_rules(const Target &target) {
  return {auto_inline_rule(), vector_loop_innermost_rule(), unroll_table_axes_rule(target),
          parallel_vectorize_unroll_rule(target)};
}

// Rejections first: a rejected sample costs no rewriting.
PostprocessorList default_postprocessors(const Target &target) {
  if (target.backend().is_gpu()) return {rewrite_cooperative_fetch(), rewrite_gpu_unroll(), verify_gpu(target)};
  return {reject_poor_register_tiles(target), rewrite_parallel_vectorize_unroll(target), reject_serial_nests(target),
          verify_cpu()};
}

// Tile sizes matter most; the rest are occasional moves.
MutatorList default_mutators(const Target &target) {
  if (target.backend().is_gpu())
    return {{mutate_tile_size(), 0.7},
            {mutate_thread_extent(), 0.15},
            {mutate_annotation_choice("mutate_fetch_vector", ir::annotation::kCooperativeFetch), 0.1},
            {mutate_annotation_choice("mutate_unroll", ir::annotation::kUnrollStep), 0.05}};
  return {{mutate_tile_size(), 0.85},
          {mutate_annotation_choice("mutate_parallel", ir::annotation::kParallelExtent), 0.05},
          {mutate_annotation_choice("mutate_unroll", ir::annotation::kUnrollStep), 0.05},
          {mutate_compute_location(), 0.05}};
}

SearchSpace default_search_space(const Target &target) {
  return SearchSpace{default_rules(target), default_postprocessors(target), default_mutators(target)};
}

}  // namespace kiln::search
