// What runs inside one throw-away child process: the reference job (run the naive
// artifact once and send every buffer back) and the candidate job (check against the
// reference, then time). Both report through message frames on `socket`; see
// runner_server.cc for how the frames and the child's exit become a RunResult.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure/artifact.h"
#include "measure/runner.h"

namespace kiln::measure::detail {

/// Every parameter's contents after the reference ran once on the seeded inputs.
struct ReferenceOutputs {
  std::vector<ParamSpec> params;
  std::vector<std::string> buffers;
  int64_t total_bytes() const;
};

struct ChildLimits {
  /// Address space the job may add to what the process already maps; 0: unlimited.
  int64_t memory_limit_bytes = 0;
  /// kiln_rt_set_num_threads before running; 0: the runtime's default.
  int num_threads = 0;
};

/// Frames sent: {"phase": ...} while progressing; then either {"reference": params}
/// followed by one raw frame per buffer, or {"result": {...}} on failure.
void reference_job(int socket, const std::string &path, uint64_t seed, const ChildLimits &limits);

/// Frames sent: {"phase": "loading"|"checking"|"timing"}, then {"result": {...}}.
/// `reference` may be null (no correctness check).
void candidate_job(int socket, const RunInput &input, const ReferenceOutputs *reference, const ChildLimits &limits);

}  // namespace kiln::measure::detail
