// Record validation and canonicalization before storage.

#include "database/prepared_record.h"

#include "database/error.h"
#include "support/json_checks.h"
#include "support/json_read.h"
#include "support/sha256.h"
#include "target/target.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <stdexcept>

namespace kiln::db {

// Parsed and bounded in depth: stored JSON is printed and compared recursively later.
static nlohmann::json parse_json(std::string_view text, const char *field) {
  nlohmann::json j;
  try {
    j = kiln::support::parse_json(text);
  } catch (const nlohmann::json::exception &e) {  // syntax errors and out-of-range numbers alike
    throw DbError(std::string(field) + " is not valid JSON: " + e.what());
  }
  try {
    support::require_max_depth(j, field);
  } catch (const std::invalid_argument &e) {
    throw DbError(e.what());
  }
  return j;
}

static int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string canonical_target(std::string_view target) {
  try {
    return Target::parse(target).str();
  } catch (const std::invalid_argument &e) {
    throw DbError(std::string("bad target: ") + e.what());
  }
}

static void check_latencies(const std::vector<double> &latencies) {
  if (latencies.empty()) throw DbError("a successful record needs at least one latency");
  for (double l : latencies)
    if (!std::isfinite(l) || l <= 0.0)
      throw DbError("latency " + std::to_string(l) + " s is not a positive finite number of seconds");
}

PreparedRecord prepare_record(const Record &record, NativeCpu native_cpu) {
  PreparedRecord p;
  p.workload = record.workload;
  if (p.workload.canonical_json.empty()) throw DbError("workload canonical JSON is empty");
  parse_json(p.workload.canonical_json, "workload canonical JSON");
  // The hash is of the exact canonical bytes: never re-serialize them, or
  // other compilers computing the key from the documented form would miss.
  std::string hash = support::sha256_hex(p.workload.canonical_json);
  if (p.workload.key_hash.empty())
    p.workload.key_hash = hash;
  else if (p.workload.key_hash != hash)
    throw DbError("workload key hash " + p.workload.key_hash + " is not the sha256 of its canonical JSON (" + hash +
                  ")");

  Target target;
  try {
    target = Target::parse(record.target, native_cpu);
  } catch (const std::invalid_argument &e) {
    throw DbError(std::string("bad target: ") + e.what());
  }
  p.target = target.str();
  p.device_kind = target.device_kind();
  p.device_model = target.device_model();

  // Re-serializing makes two spellings of one trace one record.
  p.trace_json = parse_json(record.trace_json, "trace").dump();
  p.trace_hash = support::sha256_hex(p.trace_json);

  p.ok = record.ok();
  if (p.ok) {
    check_latencies(record.latencies());
    p.latencies_json = nlohmann::json(record.latencies()).dump();
    p.mean_latency = record.mean_latency();
    if (record.confirmed_latency) {
      check_latencies({*record.confirmed_latency});
      p.confirmed_latency = record.confirmed_latency;
    }
  } else {
    if (record.confirmed_latency) throw DbError("an error record has no confirmed latency");
    if (record.error().kind == ErrorKind::kNone)
      throw DbError("an error record needs an error kind other than \"none\" (build_error, run_timeout, ...)");
    p.error_kind = std::string(to_string(record.error().kind));
    p.error_message = record.error().message;
  }

  // The two column fields leave the JSON; the rest is stored as one object.
  RecordMetadata columns_cleared = record.metadata;
  p.sketch_instructions = columns_cleared.sketch_instructions;
  if (!columns_cleared.packed_inputs.is_null()) p.packed_inputs_json = columns_cleared.packed_inputs.dump();
  columns_cleared.sketch_instructions.reset();
  columns_cleared.packed_inputs = nullptr;
  p.metadata_json = columns_cleared.to_json().dump();
  p.kiln_version = record.kiln_version.empty() ? std::string(kiln_version()) : record.kiln_version;
  p.created_at_ms = record.created_at_ms == 0 ? now_ms() : record.created_at_ms;
  return p;
}

}  // namespace kiln::db
