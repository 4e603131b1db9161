#include "scheduler/measured_programs.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "database/jsonl.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "support/json_read.h"
#include "te/te.h"

namespace kiln::scheduler {

double label_latency(const std::vector<double> &repeat_seconds, double anchor_ratio, LatencyLabel kind) {
  if (repeat_seconds.empty()) return 0;
  if (kind == LatencyLabel::kFastestRepeat) {
    double fastest = *std::min_element(repeat_seconds.begin(), repeat_seconds.end());
    return anchor_ratio > 0 ? fastest / anchor_ratio : fastest;
  }
  double mean = std::accumulate(repeat_seconds.begin(), repeat_seconds.end(), 0.0) / repeat_seconds.size();
  return kind == LatencyLabel::kAnchoredMean && anchor_ratio > 0 ? mean / anchor_ratio : mean;
}

double label_latency(const db::Record &record, LatencyLabel kind) {
  if (!record.ok()) return 0;
  if (kind == LatencyLabel::kMeasuredMean) return record.mean_latency();
  return label_latency(record.latencies(), record.metadata.anchor_ratio, kind);
}

bool timed_with_flushed_args(const db::Record &record) { return record.metadata.flush_args; }

MeasuredPrograms load_measured_programs(db::Database &database, const std::string &target, const LoadOptions &options) {
  // The database has no per-target listing, so the records come through the JSONL export.
  std::stringstream jsonl;
  std::vector<std::string> damaged;
  database.export_jsonl(jsonl, &damaged);
  MeasuredPrograms out;
  out.unreplayable = damaged.size();
  if (!damaged.empty()) out.first_replay_error = damaged.front();
  std::map<std::string, std::vector<std::pair<double, db::Record>>> by_task;
  std::string line;
  while (std::getline(jsonl, line)) {
    if (line.empty()) continue;
    db::Record r = db::record_from_jsonl(line);
    if (r.target != target) continue;
    ++out.records_for_target;
    if (!r.ok()) {
      ++out.errors;
      continue;
    }
    if (r.workload.key_hash == options.skip_workload) continue;
    if (options.flush_args && timed_with_flushed_args(r) != *options.flush_args) continue;
    double latency = label_latency(r, options.labels);
    by_task[r.workload.key_hash].emplace_back(latency, std::move(r));
  }
  for (auto &[hash, records] : by_task) {
    std::stable_sort(records.begin(), records.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    size_t keep = options.max_per_task == 0 ? records.size() : std::min(records.size(), options.max_per_task);
    ir::PrimFunc unscheduled;
    try {
      ops::Workload w =
          ops::Workload::from_json(kiln::support::parse_json(records.front().second.workload.canonical_json));
      unscheduled = w.lower();
      out.summaries[hash] = w.summary();
    } catch (const std::exception &e) {
      if (out.unreplayable == 0) out.first_replay_error = e.what();
      out.unreplayable += records.size();
      continue;
    }
    for (size_t i = 0; i < keep; ++i) {
      // Evenly spread over the latency order: the best, the worst and those between.
      const auto &[latency, r] = records[i * (records.size() - 1) / std::max<size_t>(keep - 1, 1)];
      try {
        out.programs.push_back(ir::Schedule::replay(unscheduled, ir::Trace::from_json(db::parse_trace(r))).func());
      } catch (const std::exception &e) {
        if (out.unreplayable++ == 0) out.first_replay_error = e.what();
        continue;
      }
      out.latencies.push_back(latency);
      out.tasks.push_back(hash);
    }
  }
  return out;
}

}  // namespace kiln::scheduler
