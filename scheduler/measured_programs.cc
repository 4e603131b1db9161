#include "scheduler/measured_programs.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "database/jsonl.h"
#include "ir/schedule/schedule.h"
#include "ir/te.h"
#include "ir/workload.h"

namespace kiln::scheduler {

MeasuredPrograms load_measured_programs(db::Database &database, const std::string &target, const LoadOptions &options) {
  // The database has no per-target listing, so the records come through the JSONL export.
  std::stringstream jsonl;
  database.export_jsonl(jsonl);
  MeasuredPrograms out;
  std::map<std::string, std::vector<db::Record>> by_task;
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
    by_task[r.workload.key_hash].push_back(std::move(r));
  }
  for (auto &[hash, records] : by_task) {
    std::stable_sort(records.begin(), records.end(),
                     [](const db::Record &a, const db::Record &b) { return a.mean_latency() < b.mean_latency(); });
    size_t keep = options.max_per_task == 0 ? records.size() : std::min(records.size(), options.max_per_task);
    ir::PrimFunc unscheduled;
    try {
      ir::Workload w = ir::Workload::from_json(nlohmann::json::parse(records.front().workload.canonical_json));
      unscheduled = te::lower(w.build_dag(), w.ops.size() == 1 ? w.ops[0].op : "fused");
    } catch (const std::exception &e) {
      if (out.unreplayable == 0) out.first_replay_error = e.what();
      out.unreplayable += records.size();
      continue;
    }
    for (size_t i = 0; i < keep; ++i) {
      // Evenly spread over the latency order: the best, the worst and those between.
      const db::Record &r = records[i * (records.size() - 1) / std::max<size_t>(keep - 1, 1)];
      try {
        out.programs.push_back(
            ir::Schedule::replay(unscheduled, ir::Trace::from_json(nlohmann::json::parse(r.trace_json))).func());
      } catch (const std::exception &e) {
        if (out.unreplayable++ == 0) out.first_replay_error = e.what();
        continue;
      }
      out.latencies.push_back(r.mean_latency());
      out.tasks.push_back(hash);
    }
  }
  return out;
}

}  // namespace kiln::scheduler
