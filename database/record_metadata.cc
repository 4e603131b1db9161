#include "database/record_metadata.h"

#include <string>

#include "database/error.h"

namespace kiln::db {

nlohmann::json RecordMetadata::to_json() const {
  nlohmann::json j = other.is_object() ? other : nlohmann::json::object();
  if (sketch_instructions) j["sketch_instructions"] = *sketch_instructions;
  if (!packed_inputs.is_null()) j["packed_inputs"] = packed_inputs;
  if (flush_args) j["flush_args"] = true;
  if (anchor_ratio > 0) j["anchor_ratio"] = anchor_ratio;
  if (number) j["number"] = *number;
  if (build_seconds) j["build_seconds"] = *build_seconds;
  if (run_seconds) j["run_seconds"] = *run_seconds;
  if (adopted) j["adopted"] = true;
  if (fitted) j["fitted"] = true;
  if (!pipeline.is_null()) j["pipeline"] = pipeline;
  if (!measured_by.is_null()) j["measured_by"] = measured_by;
  if (!disputed.empty()) j["disputed"] = disputed;
  return j;
}

RecordMetadata RecordMetadata::from_json(const nlohmann::json &j) {
  if (!j.is_object()) throw DbError("metadata must be a JSON object, got " + std::string(j.type_name()));
  RecordMetadata m;
  auto wrong = [](const std::string &key, const char *want, const nlohmann::json &value) {
    return DbError("metadata '" + key + "' must be " + want + ", got " + value.dump());
  };
  for (const auto &[key, value] : j.items()) {
    if (key == "sketch_instructions") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) throw wrong(key, "a non-negative integer", value);
      m.sketch_instructions = value.get<int64_t>();
    } else if (key == "packed_inputs") {
      if (!value.is_array()) throw wrong(key, "an array", value);
      m.packed_inputs = value;
    } else if (key == "flush_args" || key == "adopted" || key == "fitted") {
      if (!value.is_boolean()) throw wrong(key, "true or false", value);
      (key == "flush_args" ? m.flush_args : key == "adopted" ? m.adopted : m.fitted) = value.get<bool>();
    } else if (key == "anchor_ratio") {
      if (!value.is_number() || !(value.get<double>() >= 0)) throw wrong(key, "a non-negative number", value);
      m.anchor_ratio = value.get<double>();
    } else if (key == "number") {
      if (!value.is_number_integer()) throw wrong(key, "an integer", value);
      m.number = value.get<int64_t>();
    } else if (key == "build_seconds" || key == "run_seconds") {
      if (!value.is_number()) throw wrong(key, "a number", value);
      (key == "build_seconds" ? m.build_seconds : m.run_seconds) = value.get<double>();
    } else if (key == "pipeline" || key == "measured_by") {
      if (!value.is_object()) throw wrong(key, "an object", value);
      (key == "pipeline" ? m.pipeline : m.measured_by) = value;
    } else if (key == "disputed") {
      if (!value.is_string() || value.get<std::string>().empty()) throw wrong(key, "a non-empty string", value);
      m.disputed = value.get<std::string>();
    } else {
      m.other[key] = value;
    }
  }
  return m;
}

}  // namespace kiln::db
