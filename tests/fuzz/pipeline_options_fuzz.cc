// The pipeline options a compiled model's model.json and every tuning record store
// (frontend::PipelineOptions::from_json, read by `kiln compile` to say which options a
// database was tuned with): any bytes are refused with std::invalid_argument or a JSON
// error, or read as options that write back as themselves, whose flags name them.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "frontend/pipeline.h"
#include "support/json_read.h"
#include "tests/fuzz/fuzz_helpers.h"
#include "tests/fuzz/fuzz_target.h"

using kiln::testing::require;

KILN_FUZZ_TARGET(pipeline_options) {
  kiln::frontend::PipelineOptions options;
  try {
    options = kiln::frontend::PipelineOptions::from_json(kiln::support::parse_json(input));
  } catch (const std::invalid_argument &) {
    return;
  } catch (const nlohmann::json::exception &) {
    return;
  }
  require(kiln::frontend::PipelineOptions::from_json(options.to_json()) == options,
          "the options do not read back as themselves");
  const std::string flags = options.flags();
  require((flags.find("--layout NCHW") != std::string::npos) == (options.layout == kiln::frontend::ImageLayout::kNCHW),
          "the flags do not name the layout");
  require((flags.find("--no-layout-rewrite") != std::string::npos) == !options.layout_rewrite,
          "the flags do not name the layout rewrite");
}
