// Measured programs of a database rebuilt for the cost model: every successful record of
// a target, its trace replayed on its workload. Used to evaluate the cost model
// (`kiln costmodel eval`) and to warm-start a task's model from the other tasks.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "database/database.h"
#include "ir/stmt.h"

namespace kiln::scheduler {

/// The latency that stands for a record's program.
enum class LatencyLabel {
  /// Its fastest repeat, divided by its round's anchor ratio where it has one: what the
  /// cost model learns from. Interference on a shared host only ever slows a repeat
  /// down, and one slow repeat of three moved a mean by up to 8%, more than the gap
  /// between half of a dense layer's programs (bench/RESULTS.md, "Labels").
  kFastestRepeat,
  /// The mean of its repeats divided by the anchor ratio: what competes for the best
  /// and is stored as the record's latency.
  kAnchoredMean,
  /// The mean of its repeats as measured.
  kMeasuredMean,
};

struct MeasuredPrograms {
  std::vector<ir::PrimFunc> programs;
  std::vector<double> latencies;                 ///< seconds, > 0: label_latency of LoadOptions::labels
  std::vector<std::string> tasks;                ///< workload hash of each program
  std::map<std::string, std::string> summaries;  ///< workload hash -> "conv2d+relu 1x56x56x64"
  size_t records_for_target = 0;
  size_t errors = 0;        ///< error records (no latency): not rankable
  size_t unreplayable = 0;  ///< traces that no longer apply to their workload
  std::string first_replay_error;
};

struct LoadOptions {
  /// Leave out this workload's records ("" = none).
  std::string skip_workload;
  /// At most this many records per task, evenly spread over its records in
  /// latency order (fast and slow alike; the task's best is among them unless its
  /// trace no longer replays, so labels normalized against it mean the same with or
  /// without sampling); 0 = all.
  size_t max_per_task = 0;
  /// Which latency of each record labels its program (label_latency).
  LatencyLabel labels = LatencyLabel::kFastestRepeat;
  /// Only records timed with this protocol (TimingOptions::flush_args): latencies of
  /// evicted and hot buffers are not on one scale.
  std::optional<bool> flush_args;
};

/// Whether the record's program was timed with its buffers evicted before every call
/// (metadata "flush_args"; records without it were timed hot).
bool timed_with_flushed_args(const db::Record &record);

/// The latency of `kind` of a record; the anchored kinds divide by the `anchor_ratio`
/// of its metadata when it has one (TuneOptions::anchor_rounds), so that records of
/// rounds run at different host speeds compare; 0 for an error record.
double label_latency(const db::Record &record, LatencyLabel kind = LatencyLabel::kFastestRepeat);
/// The same from a program's repeats and its round's anchor ratio (0: none), as the
/// tuner has them before the record is written.
double label_latency(const std::vector<double> &repeat_seconds, double anchor_ratio,
                     LatencyLabel kind = LatencyLabel::kFastestRepeat);

/// Throws db::DbError when the database cannot be read.
MeasuredPrograms load_measured_programs(db::Database &database, const std::string &target,
                                        const LoadOptions &options = {});

}  // namespace kiln::scheduler
