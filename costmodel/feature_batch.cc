#include "costmodel/features.h"
#include "support/parallel.h"

namespace kiln::costmodel {

std::vector<ProgramFeatures> extract_features_batch(const std::vector<ir::PrimFunc> &programs, int threads,
                                                    const GpuLimits *gpu) {
  std::vector<ProgramFeatures> results(programs.size());
  support::parallel_for(programs.size(), threads, [&](size_t i) { results[i] = extract_features(programs[i], gpu); });
  return results;
}

}  // namespace kiln::costmodel
