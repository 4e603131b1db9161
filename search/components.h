// The rules, postprocessors and mutators Kiln ships, one factory each; defaults.cc puts
// them into the default lists per target. Each is described in its own file.
#pragma once

#include <memory>
#include <string>

#include "search/space.h"

namespace kiln::search {

// ---- schedule rules (rules/*.cc) ---------------------------------------------------------
std::shared_ptr<const ScheduleRule> auto_inline_rule();
std::shared_ptr<const ScheduleRule> multi_level_tiling_rule(const Target &target);
std::shared_ptr<const ScheduleRule> compute_location_rule();
std::shared_ptr<const ScheduleRule> parallel_vectorize_unroll_rule(const Target &target);
std::shared_ptr<const ScheduleRule> unroll_table_axes_rule(const Target &target);
/// cuda targets: spatial loops over blocks of a sampled number of threads.
std::shared_ptr<const ScheduleRule> auto_bind_rule(const Target &target);
/// cuda targets: blocks with a reduction tiled for thread blocks and threads, inputs
/// staged in shared memory, accumulators in registers (rules/gpu_multi_level_tiling.cc).
std::shared_ptr<const ScheduleRule> gpu_multi_level_tiling_rule();
/// cuda targets: rows reduced to one value each by a thread block's threads together
/// (rules/cross_thread_reduction.cc).
std::shared_ptr<const ScheduleRule> cross_thread_reduction_rule(const Target &target);
/// cuda targets: a sampled auto-unroll depth per block (rules/gpu_unroll.cc).
std::shared_ptr<const ScheduleRule> gpu_unroll_rule();
/// Untuned defaults only: a reduction's innermost spatial loop goes below its reduction loops.
std::shared_ptr<const ScheduleRule> vector_loop_innermost_rule();

// ---- postprocessors (postprocessors.cc) ----------------------------------------------------
std::shared_ptr<const Postprocessor> reject_poor_register_tiles(const Target &target);
std::shared_ptr<const Postprocessor> rewrite_parallel_vectorize_unroll(const Target &target);
std::shared_ptr<const Postprocessor> reject_serial_nests(const Target &target);
std::shared_ptr<const Postprocessor> verify_cpu();
/// cuda targets: the program lowers to GPU kernels within the target's limits
/// (ir::lower_for_gpu), or is rejected.
std::shared_ptr<const Postprocessor> verify_gpu(const Target &target);
/// cuda targets: lays out the shared-memory copies gpu_multi_level_tiling marked over the
/// threads of their block, with the sampled vector length.
std::shared_ptr<const Postprocessor> rewrite_cooperative_fetch();
/// cuda targets: a block's sampled unroll depth (gpu_unroll) as the unroll pragma on its
/// outermost serial loop inside its thread bindings.
std::shared_ptr<const Postprocessor> rewrite_gpu_unroll();

// ---- mutators (mutators.cc) ----------------------------------------------------------------
std::shared_ptr<const Mutator> mutate_tile_size();
/// Another candidate of a sample_categorical whose result feeds the block annotation
/// `annotation_key`.
std::shared_ptr<const Mutator> mutate_annotation_choice(std::string name, std::string annotation_key);
std::shared_ptr<const Mutator> mutate_compute_location();
/// Another candidate of a sample_categorical whose result is a split factor (the
/// threads per block of auto_bind).
std::shared_ptr<const Mutator> mutate_thread_extent();

}  // namespace kiln::search
