// A Record checked and turned into the exact column values stored. Private to
// the database folder: commit and import both go through prepare_record, so
// a record is validated the same way whichever door it comes in by.

#pragma once

#include "database/record.h"
#include "target/target.h"

#include <optional>
#include <string>
#include <string_view>

namespace kiln::db {

struct PreparedRecord {
  Workload workload;  ///< key_hash filled and checked
  std::string target;
  std::string device_kind;
  std::string device_model;
  std::string trace_json;  ///< re-serialized: sorted keys, no whitespace
  std::string trace_hash;  ///< sha256 of trace_json; the uniqueness key
  bool ok = false;
  std::string latencies_json;               ///< ok only
  double mean_latency = 0.0;                ///< ok only
  std::optional<double> confirmed_latency;  ///< ok only
  std::string error_kind;                   ///< !ok only
  std::string error_message;                ///< !ok only
  std::string metadata_json;                ///< RecordMetadata without the two columns below
  std::optional<int64_t> sketch_instructions;
  std::optional<std::string> packed_inputs_json;
  std::string kiln_version;
  int64_t created_at_ms = 0;
};

/// Validates `record` and computes its stored form. Throws DbError saying
/// which field is wrong; the caller adds which record. A record committed here
/// was measured here, so its `-mcpu=native` names this host; an imported one
/// keeps a `native` written by an older Kiln (NativeCpu::kKeepAsStored).
PreparedRecord prepare_record(const Record &record, NativeCpu native_cpu);

/// The canonical form of a target string given by a user (`native` is this host).
/// Throws DbError for a bad one.
std::string canonical_target(std::string_view target);

}  // namespace kiln::db
