// What `kiln tune --model` shows of a job: a live table while it runs (redrawn on a
// terminal after every round) and, with --report DIR, a self-contained HTML page of
// the whole run (inline SVG charts, no scripts, no outside files).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/task_scheduler.h"

namespace kiln::scheduler {

struct ReportBudget {
  int64_t trials = 0;
  double time_limit_seconds = 0;  ///< 0 = none
};

/// The live table: a headline (round, trials, estimated model latency and its change
/// over the last rounds, trials/s, ETA), then one row per task (operators and shapes,
/// weight, trials, best ms, GFLOP/s, share of the estimated model latency). Every line
/// ends in '\n'.
std::string progress_table(const SchedulerProgress &progress, const ReportBudget &budget);

/// Where the job's time went, summed over its tasks.
TimeBreakdown total_time(const SchedulerResult &result);

/// The model's latency measured with the executor, untuned and tuned.
/// Axis ticks at round values (1, 2 or 5 times a power of ten) from `lo` to `hi`, about
/// `target` of them: 25, 30, 35 ms reads better than 24.2, 31.25, 38.31.
std::vector<double> round_ticks(double lo, double hi, int target);

struct MeasuredModel {
  double untuned_ms = 0;
  double tuned_ms = 0;
};

struct ReportContext {
  std::string model;   ///< the model file, as given
  std::string target;  ///< canonical target string
  std::string allocation;
  ReportBudget budget;
  std::optional<MeasuredModel> measured;
  /// The whole job's wall time (tuning, re-timing, measuring the model); the charts over
  /// time and the time breakdown run to it. 0: the tuning's own.
  double job_seconds = 0;
};

/// Writes DIR/index.html: a headline (measured tuned and untuned latency, speedup, the
/// estimate, trials and time), each task's share of the estimate as bars, the estimated
/// model latency over trials and over wall time with the final re-timed figure, each
/// task's best latency over trials (small charts, largest share first), the task table
/// in the same order, and where the time went. Creates DIR; throws std::runtime_error when it cannot write.
/// Returns the page's path.
/// Creates DIR and checks that a file can be written in it (and removed), so that a job
/// learns before it starts, not after, that its report cannot be written. Throws
/// std::runtime_error saying why.
void check_report_folder(const std::filesystem::path &dir);

std::filesystem::path write_html_report(const std::filesystem::path &dir, const SchedulerResult &result,
                                        const ReportContext &context);

}  // namespace kiln::scheduler
