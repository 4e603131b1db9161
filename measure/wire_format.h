// JSON forms of runner requests and results, exchanged between the runner and its
// server process. Internal to measure/; not a stable format.
#pragma once

#include <nlohmann/json.hpp>

#include "measure/runner.h"

namespace kiln::measure::detail {

nlohmann::json to_json(const RunInput &input);
RunInput run_input_from_json(const nlohmann::json &j);

nlohmann::json to_json(const RunResult &result);
RunResult run_result_from_json(const nlohmann::json &j);

}  // namespace kiln::measure::detail
