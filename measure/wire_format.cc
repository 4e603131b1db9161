#include "measure/wire_format.h"

namespace kiln::measure::detail {

nlohmann::json to_json(const RunInput &input) {
  const TimingOptions &t = input.timing;
  return {{"artifact", input.artifact_path},
          {"reference", input.reference_artifact_path},
          {"seed", input.input_seed},
          {"rtol", input.tolerance.rtol},
          {"atol", input.tolerance.atol},
          {"timing",
           {{"number", t.number},
            {"repeat", t.repeat},
            {"min_repeat_ms", t.min_repeat_ms},
            {"max_number", t.max_number},
            {"flush_cache", t.flush_cache},
            {"flush_args", t.flush_args},
            {"give_up_after_seconds", t.give_up_after_seconds}}}};
}

RunInput run_input_from_json(const nlohmann::json &j) {
  RunInput input;
  input.artifact_path = j.at("artifact").get<std::string>();
  input.reference_artifact_path = j.at("reference").get<std::string>();
  input.input_seed = j.at("seed").get<uint64_t>();
  input.tolerance.rtol = j.at("rtol").get<double>();
  input.tolerance.atol = j.at("atol").get<double>();
  const nlohmann::json &t = j.at("timing");
  input.timing.number = t.at("number").get<int64_t>();
  input.timing.repeat = t.at("repeat").get<int>();
  input.timing.min_repeat_ms = t.at("min_repeat_ms").get<double>();
  input.timing.max_number = t.at("max_number").get<int64_t>();
  input.timing.flush_cache = t.at("flush_cache").get<bool>();
  input.timing.flush_args = t.value("flush_args", false);
  input.timing.give_up_after_seconds = t.value("give_up_after_seconds", 0.0);
  return input;
}

nlohmann::json to_json(const RunResult &result) {
  return {{"repeat_seconds", result.repeat_seconds},
          {"number", result.number},
          {"calibration_calls", result.calibration_calls},
          {"run_seconds", result.run_seconds},
          {"error", to_string(result.error)},
          {"message", result.message}};
}

RunResult run_result_from_json(const nlohmann::json &j) {
  RunResult result;
  result.repeat_seconds = j.value("repeat_seconds", std::vector<double>{});
  result.number = j.value("number", int64_t{0});
  result.calibration_calls = j.value("calibration_calls", int64_t{0});
  result.run_seconds = j.value("run_seconds", 0.0);
  result.error = error_kind_from_string(j.value("error", "runtime_error")).value_or(ErrorKind::kRuntimeError);
  result.message = j.value("message", "");
  return result;
}

}  // namespace kiln::measure::detail
