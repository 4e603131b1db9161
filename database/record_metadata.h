// What a record says about how it was made, beyond its timings: typed, with one JSON
// mapping (`to_json` / `from_json`) used by the database file, the JSONL export and
// import. Two fields are also columns of the records table (schema 4), because code
// reads them back for every lookup: the C API hands `packed_inputs` to other
// compilers, and the tuner resumes the sketch a trace grew from (`sketch_instructions`).
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace kiln::db {

struct RecordMetadata {
  /// Instructions of the sketch at the start of the trace (the rest is
  /// postprocessing): what mutators change when the tuner resumes from this record.
  std::optional<int64_t> sketch_instructions;
  /// The constant inputs (weights) the program reads packed ahead of time:
  /// [{"input": i, "shape": [...]}, ...] (ir::packed_inputs); null when none.
  nlohmann::json packed_inputs;
  /// Timed with the kernel's buffers evicted from the caches before every call.
  bool flush_args = false;
  /// The round's anchor ratio the latencies are divided by (TuneOptions::anchor_rounds);
  /// 0: not anchored.
  double anchor_ratio = 0;
  /// Calls per timed repeat.
  std::optional<int64_t> number;
  std::optional<double> build_seconds, run_seconds;
  /// Carried over from a sibling task's program, with its tilings fitted to this task.
  bool adopted = false, fitted = false;
  /// The frontend pipeline options of the model job that tuned it
  /// (frontend::PipelineOptions::to_json); null for single operators.
  nlohmann::json pipeline;
  /// Where the timings were measured: {"runner": id, "hostname": ..., "target": ...,
  /// "kiln_version": ..., "device_name": ...} (measure::RunResult::measured_by); null
  /// when not known (records of the local runner before this field).
  nlohmann::json measured_by;
  /// Why the program's figure is in dispute, or empty: a re-timing on another runner of
  /// the key disagreed with its measurement beyond noise. A disputed record is not used
  /// for ranking or compiling (Database::top_k passes it over) until it is re-timed
  /// (Database::commit_confirmation clears it).
  std::string disputed;
  /// Keys this Kiln does not know (another tool's, or a later Kiln's): kept as they were.
  nlohmann::json other = nlohmann::json::object();

  bool operator==(const RecordMetadata &) const = default;

  /// The stored object: only the fields that are set.
  nlohmann::json to_json() const;
  /// From a stored object. Throws DbError naming a known key of the wrong type.
  static RecordMetadata from_json(const nlohmann::json &j);
};

}  // namespace kiln::db
