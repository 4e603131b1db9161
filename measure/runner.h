// The runner interface: loads built artifacts, checks them against a reference and
// times them. See measure/README.md for the protocol and the isolation policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure/error_kind.h"
#include "measure/timing_options.h"

namespace kiln::measure {

/// When a floating-point output counts as equal to the reference's: the L2 norm of the
/// difference must be at most rtol * ||reference|| + atol, and NaN/Inf must appear at
/// the same places with the same value. Integer and bool outputs must match exactly.
struct Tolerance {
  double rtol = 1e-4;
  /// Lets an all-zero reference pass against rounding noise; tiny on purpose.
  double atol = 1e-6;
};

struct RunInput {
  std::string artifact_path;
  /// The naive build of the same program. Empty: skip the correctness check (timing
  /// only, e.g. for benchmarks of an already-verified artifact).
  std::string reference_artifact_path;
  TimingOptions timing;
  /// Seeds the random inputs; the reference's outputs are cached per (reference, seed).
  uint64_t input_seed = 0;
  Tolerance tolerance;
  /// A runner (its id, RunResult::measured_by's "runner") to keep the run away from
  /// when another can take it: the re-timing of a program on a device it was not first
  /// measured on. Runners of one device (the local runner) ignore it.
  std::string avoid_runner;
};

struct RunResult {
  /// One entry per repeat: that repeat's mean time per call, in seconds.
  std::vector<double> repeat_seconds;
  /// Calls per repeat after growing towards min_repeat_ms.
  int64_t number = 0;
  /// Calls spent finding `number` (untimed, not stored).
  int64_t calibration_calls = 0;
  /// Wall time of the whole run (loading, checking, timing), for progress reports.
  double run_seconds = 0;
  ErrorKind error = ErrorKind::kNone;
  std::string message;
  /// Where it was measured, as JSON text: {"runner": id, "hostname": ..., "target": ...,
  /// "kiln_version": ..., "device_name": ...}; empty where the runner does not say.
  std::string measured_by;

  bool ok() const { return error == ErrorKind::kNone; }
};

/// Measures batches of candidates. Implementations must turn every failure of a
/// candidate into a RunResult error and keep going.
class Runner {
 public:
  virtual ~Runner() = default;
  /// One result per input, in order.
  virtual std::vector<RunResult> run(const std::vector<RunInput> &batch) = 0;
  /// Whether the timed repeats of one batch run side by side on one device, so that a
  /// program re-timed in the batch shows how fast the device ran for all of it (the
  /// tuner's anchor, scheduler/README.md). False: inputs may run on different devices
  /// or one after the other.
  virtual bool times_batch_together() const { return false; }
  /// Whether a run's timing uses this host's cores, so that a build beside it would
  /// disturb it (the local CPU runner). False where a GPU (timed by its own events) or
  /// another machine measures: the tuner then builds the next part of a batch while
  /// the previous part runs.
  virtual bool timing_shares_host_cores() const { return true; }
  /// The address space one run may add (its inputs, outputs and the reference's
  /// outputs must fit); 0 where the runner does not say (a tracker's runners each
  /// apply their own).
  virtual int64_t memory_limit_bytes() const { return 0; }
};

}  // namespace kiln::measure
