// A tuning record: one measurement of one trace of one workload on one target.

#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "database/record_metadata.h"
#include "support/error_kind.h"

namespace kiln::db {

/// Why a candidate produced no timing: the measurement's own vocabulary, stored as its
/// lowercase name. A stored error is never kNone.
using support::error_kind_from_string;
using support::ErrorKind;
using support::to_string;

/// A failed measurement.
struct MeasureError {
  ErrorKind kind = ErrorKind::kRuntimeError;
  std::string message;
  bool operator==(const MeasureError &) const = default;
};

/// The workload a record belongs to. `canonical_json` is the documented
/// workload key produced by the IR; `key_hash` is sha256_hex of exactly those
/// bytes (left empty, the database computes it). The summary fields are for
/// people reading `kiln db stats`, never for lookup.
struct Workload {
  std::string key_hash;
  std::string canonical_json;
  std::string op_summary;  ///< e.g. "conv2d+bias+relu"
  std::string shapes;      ///< e.g. "1x64x56x56,64x64x3x3"
  bool operator==(const Workload &) const = default;
};

/// One measurement. `outcome` holds every repeat's mean latency in seconds,
/// or the error. Records are immutable facts: committing the same
/// (workload, target, trace) again is ignored (see Database::commit).
struct Record {
  Workload workload;
  std::string target;      ///< target string; stored in canonical form (Target::str)
  std::string trace_json;  ///< the trace; stored re-serialized with sorted keys
  std::variant<std::vector<double>, MeasureError> outcome;
  RecordMetadata metadata;    ///< how it was made: sketch, packed weights, timing protocol, pipeline
  std::string kiln_version;   ///< empty: filled with this library's version at commit
  int64_t created_at_ms = 0;  ///< Unix time in ms; 0: filled with "now" at commit
  int64_t id = 0;             ///< row id once stored; 0 before
  /// Successful records only: the median of re-timings of this program side by side
  /// with the other top programs at the end of a tuning run, in seconds. Lookups rank
  /// confirmed records before unconfirmed ones: a single tuning measurement of the
  /// fastest programs leans low (being fast in it is how they got there).
  std::optional<double> confirmed_latency;

  bool ok() const { return std::holds_alternative<std::vector<double>>(outcome); }
  const std::vector<double> &latencies() const { return std::get<std::vector<double>>(outcome); }
  const MeasureError &error() const { return std::get<MeasureError>(outcome); }
  /// Mean of the repeats in seconds; only for successful records.
  double mean_latency() const;
};

/// The record's trace, parsed. Throws DbError naming the record (its id and workload)
/// when the stored text is not JSON: a file changed or damaged outside Kiln.
nlohmann::json parse_trace(const Record &record);

/// The version string of this Kiln build, stored in every record.
std::string_view kiln_version();

/// sha256_hex of a workload's canonical JSON: the key other compilers look up.
std::string workload_hash_of(std::string_view canonical_json);

/// The key hash a lookup argument names: the hash itself (64 hex digits), or the
/// canonical workload JSON (hashed as given). Throws DbInvalidArgument for anything
/// else, e.g. JSON that does not parse or a truncated hash.
std::string workload_hash_from_argument(std::string_view workload);

}  // namespace kiln::db
