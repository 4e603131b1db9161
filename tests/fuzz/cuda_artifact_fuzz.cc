// CUDA artifact files (kiln-cuda-measure's input, what a runner receives): any text is
// refused with std::invalid_argument or gives an artifact whose every buffer and
// launch is within the format's limits.
#include <stdexcept>

#include "device/cuda_artifact.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(cuda_artifact) {
  kiln::device::CudaArtifact a;
  try {
    a = kiln::device::parse_cuda_artifact(input);
  } catch (const std::invalid_argument &) {
    return;
  }
  if (a.launches.empty()) throw std::logic_error("an artifact without launches was accepted");
  for (const kiln::device::CudaArtifactBuffer &b : a.buffers)
    if (b.bytes() <= 0 || b.bytes() > (int64_t{1} << 40)) throw std::logic_error("a buffer of impossible size");
  for (const kiln::device::CudaArtifactLaunch &l : a.launches)
    for (int d = 0; d < 3; ++d)
      if (l.block[d] < 1 || l.block[d] > 1024 || l.grid[d] < 1 || l.shared_bytes < 0)
        throw std::logic_error("a launch outside the limits was accepted");
}
