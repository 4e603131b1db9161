// Record <-> JSON line.

#include "database/jsonl.h"

#include "database/error.h"
#include "ir/schedule/trace.h"
#include "support/json_checks.h"
#include "support/json_read.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace kiln::db {

using nlohmann::json;

std::string record_to_jsonl(const Record &record) {
  json line;
  line["format"] = kJsonlFormat;
  // The canonical workload JSON travels as a string: its hash is over its
  // exact bytes, which re-serializing an embedded object could change.
  line["workload"] = {{"key_hash", record.workload.key_hash},
                      {"canonical_json", record.workload.canonical_json},
                      {"op_summary", record.workload.op_summary},
                      {"shapes", record.workload.shapes}};
  line["target"] = record.target;
  line["trace"] = parse_trace(record);
  if (record.ok()) {
    line["latencies_s"] = record.latencies();
    if (record.confirmed_latency) line["confirmed_latency_s"] = *record.confirmed_latency;
  } else {
    line["error"] = {{"kind", to_string(record.error().kind)}, {"message", record.error().message}};
  }
  line["metadata"] = record.metadata.to_json();
  line["kiln_version"] = record.kiln_version;
  line["created_at_ms"] = record.created_at_ms;
  return line.dump();
}

static const json &field(const json &object, const char *name, json::value_t type, const char *type_name) {
  auto it = object.find(name);
  if (it == object.end()) throw DbError(std::string("missing field \"") + name + "\"");
  bool matches =
      it->type() == type || (type == json::value_t::number_integer && it->type() == json::value_t::number_unsigned);
  if (!matches) throw DbError(std::string("field \"") + name + "\" must be " + type_name + ", got " + it->type_name());
  return *it;
}

static std::string string_field(const json &object, const char *name) {
  return field(object, name, json::value_t::string, "a string").get<std::string>();
}

Record record_from_jsonl(std::string_view line) {
  json j;
  try {
    j = kiln::support::parse_json(line);
  } catch (const json::exception &e) {  // syntax errors and out-of-range numbers alike
    throw DbError(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw DbError(std::string("a record line must be a JSON object, got ") + j.type_name());
  try {
    // Bounded before any recursive walk (printing, validation) of its parts.
    support::require_max_depth(j, "a record line");
  } catch (const std::invalid_argument &e) {
    throw DbError(e.what());
  }
  std::string format = string_field(j, "format");
  if (format != kJsonlFormat)
    throw DbError("unknown format \"" + format + "\"; this Kiln reads \"" + std::string(kJsonlFormat) + "\"");

  Record r;
  const json &w = field(j, "workload", json::value_t::object, "an object");
  r.workload.key_hash = string_field(w, "key_hash");
  r.workload.canonical_json = string_field(w, "canonical_json");
  r.workload.op_summary = w.contains("op_summary") ? string_field(w, "op_summary") : "";
  r.workload.shapes = w.contains("shapes") ? string_field(w, "shapes") : "";
  r.target = string_field(j, "target");
  if (!j.contains("trace")) throw DbError("missing field \"trace\"");
  // Lookups hand the stored trace to compilers, which replay it through
  // Trace::from_json: one that does not read as a trace must not become a
  // workload's best schedule.
  try {
    ir::Trace::from_json(j["trace"]);
  } catch (const std::invalid_argument &e) {
    throw DbError(std::string("field \"trace\" is not a Kiln trace: ") + e.what());
  } catch (const json::exception &e) {
    throw DbError(std::string("field \"trace\" is not a Kiln trace: ") + e.what());
  }
  r.trace_json = j["trace"].dump();

  bool has_latencies = j.contains("latencies_s");
  if (has_latencies == j.contains("error"))
    throw DbError("a record needs exactly one of \"latencies_s\" and \"error\"");
  if (has_latencies) {
    const json &l = field(j, "latencies_s", json::value_t::array, "an array of seconds");
    std::vector<double> latencies;
    for (const json &v : l) {
      if (!v.is_number()) throw DbError("field \"latencies_s\" must hold numbers, got " + std::string(v.type_name()));
      latencies.push_back(v.get<double>());
    }
    r.outcome = std::move(latencies);
    if (j.contains("confirmed_latency_s")) {
      const json &c = j["confirmed_latency_s"];
      if (!c.is_number())
        throw DbError("field \"confirmed_latency_s\" must be a number of seconds, got " + std::string(c.type_name()));
      r.confirmed_latency = c.get<double>();
    }
  } else {
    const json &e = field(j, "error", json::value_t::object, "an object");
    std::string kind = string_field(e, "kind");
    std::optional<ErrorKind> parsed = error_kind_from_string(kind);
    if (!parsed || *parsed == ErrorKind::kNone)
      throw DbError("unknown error kind \"" + kind +
                    "\"; expected build_error, build_timeout, load_error, runtime_error, run_timeout or "
                    "wrong_result");
    r.outcome = MeasureError{*parsed, string_field(e, "message")};
  }
  if (j.contains("metadata"))
    r.metadata = RecordMetadata::from_json(field(j, "metadata", json::value_t::object, "an object"));
  r.kiln_version = j.contains("kiln_version") ? string_field(j, "kiln_version") : "";
  r.created_at_ms = j.contains("created_at_ms")
                        ? field(j, "created_at_ms", json::value_t::number_integer, "an integer").get<int64_t>()
                        : 0;
  return r;
}

}  // namespace kiln::db
