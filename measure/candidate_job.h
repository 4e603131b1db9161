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
#include "measure/sandbox.h"

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
  /// Entered after the limits, before any artifact is opened.
  SandboxOptions sandbox;
};

/// Frames sent: {"phase": ...} while progressing; then either {"reference": params}
/// followed by one raw frame per buffer, or {"result": {...}} on failure.
void reference_job(int socket, const std::string &path, uint64_t seed, const ChildLimits &limits);

/// What a candidate's own child does after loading and checking.
enum class CandidateTiming {
  kFull,       ///< the whole timing protocol
  kCalibrate,  ///< warm-up and `number` only: the repeats run interleaved with the batch
};

/// Frames sent: {"phase": "loading"|"checking"|"timing"}, then {"result": {...}}; with
/// kCalibrate the result has `number` and `pass_seconds` and no repeats (unless the
/// candidate gave up, too slow, in its warm-up).
/// `reference` may be null (no correctness check).
void candidate_job(int socket, const RunInput &input, const ReferenceOutputs *reference, const ChildLimits &limits,
                   CandidateTiming timing = CandidateTiming::kFull);

/// A checked and calibrated candidate, for the interleaved timing of its batch.
struct InterleavedCandidate {
  std::string artifact_path;
  uint64_t input_seed = 0;
  int64_t number = 1;
  int repeat = 1;
  bool flush_cache = false;
  bool flush_args = false;
};

/// Times the candidates round-robin in one process: round r runs one timed pass of
/// every candidate still owed a repeat, starting at candidate r (mod n) so no program
/// always follows the same neighbour. Candidates with one parameter signature share
/// one set of buffers. Frames: {"phase": "timing", "candidate": i} before each pass,
/// {"candidate": i, "seconds": per_call} after it, {"failed": i, "error", "message"} for
/// a candidate that failed (the others go on), and {"done": true} at the end.
void interleaved_timing_job(int socket, const std::vector<InterleavedCandidate> &candidates, const ChildLimits &limits);

}  // namespace kiln::measure::detail
