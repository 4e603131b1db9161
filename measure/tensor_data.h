// Host buffers for running artifacts: 64-byte aligned (the ABI's promise), filled with
// seeded random values, and compared against the reference's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "measure/artifact.h"
#include "measure/runner.h"

namespace kiln::measure::detail {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  void *data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(void *p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
};

/// One buffer per parameter, each filled from (seed, stream, parameter index):
/// floats uniform in [-1, 1], integers uniform in [-4, 4] (small, so sums and products
/// of a few stay exact), bools 0/1. The same arguments always give the same bytes.
std::vector<AlignedBuffer> make_random_buffers(const std::vector<ParamSpec> &params, uint64_t seed, uint64_t stream);

/// The kiln_entry argument array for `buffers`.
std::vector<void *> entry_args(const std::vector<AlignedBuffer> &buffers);

/// kiln_entry's arguments for `buffers` (laid out as artifact.params): each packed param
/// is packed into a buffer appended to `packed` (kiln_prepack) and passed in its place.
/// Returns kiln_prepack's error code (0 on success) through `code`.
std::vector<void *> packed_entry_args(const LoadedArtifact &artifact, const std::vector<AlignedBuffer> &buffers,
                                      std::vector<AlignedBuffer> *packed, int32_t *code);

/// Compares the candidate's `got` with the reference's `want` for one parameter.
/// nullopt when they match under `tolerance`; otherwise why not, e.g. "max abs error
/// 3.1 at index 17 (got 1.2, want -1.9); relative L2 error 0.4 > 1e-05".
std::optional<std::string> compare_buffer(const ParamSpec &param, const void *got, std::string_view want,
                                          const Tolerance &tolerance);

/// IEEE half <-> single conversion (the host compiler may lack _Float16).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

}  // namespace kiln::measure::detail
