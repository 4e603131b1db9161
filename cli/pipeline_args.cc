#include "cli/pipeline_args.h"

#include <filesystem>
#include <stdexcept>

#include "cli/common_flags.h"
#include "cli/workload_args.h"
#include "frontend/onnx_import.h"

namespace kiln::cli {

namespace {

frontend::ImportOptions options_from(const PipelineArgs &args) {
  frontend::ImportOptions options;
  for (const std::string &spec : args.shapes) {
    size_t eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0)
      fail("--shape '" + spec + "' must look like NAME=DIMS, e.g. input=1x3x224x224");
    try {
      options.input_shapes[spec.substr(0, eq)] = ops::parse_shape(spec.substr(eq + 1));
    } catch (const std::invalid_argument &e) {
      fail("--shape '" + spec + "': " + e.what());
    }
  }
  return options;
}

}  // namespace

void add_pipeline_flags(CLI::App &cmd, PipelineArgs &args) {
  cmd.add_option("--model", args.model,
                 "the ONNX model file (IR up to 10, opsets 11-21; weights inside the file or in external data files "
                 "beside it)")
      ->required();
  cmd.add_option("--shape", args.shapes,
                 "NAME=DIMS: fix a graph input's shape (needed for dynamic dimensions), e.g. input=1x3x224x224");
  cmd.add_flag_callback(
      "--no-layout-rewrite", [&args] { args.layout_rewrite = false; },
      "do not mark the model's weights constant: programs then pack weights on every call instead of "
      "once at load (tasks get other keys; the choice is recorded, and kiln compile says when a database was "
      "tuned with another)");
  cmd.add_option("--layout", args.image_layout,
                 "NCHW|NHWC: the layout convolutions and pools run in; NHWC transposes the model's input once and "
                 "keeps the images channels-last between convolutions (tasks get other keys; the choice is "
                 "recorded, and kiln compile says when a database was tuned with another)")
      ->check(CLI::IsMember({"NCHW", "NHWC"}))
      ->capture_default_str();
  args.winograd_flag = cmd.add_flag_callback(
      "--winograd", [&args] { args.winograd = true; },
      "with --layout NHWC, on by default: run 3x3 stride-1 convolutions as Winograd F(2x2,3x3) or F(4x4,3x3), "
      "whichever saves more multiply-adds, where it saves at least half: an input transform, 16 or 36 matrix "
      "products with weights transformed at import, an output transform carrying the epilogue");
  cmd.add_flag_callback(
         "--no-winograd", [&args] { args.winograd = false; },
         "keep 3x3 convolutions direct (tasks get other keys; the choice is recorded, and kiln compile says when a "
         "database was tuned with another)")
      ->excludes(args.winograd_flag);
}

frontend::PipelineOptions pipeline_options(const PipelineArgs &args) {
  frontend::PipelineOptions options;
  options.layout = frontend::parse_image_layout(args.image_layout);
  options.layout_rewrite = args.layout_rewrite;
  bool nhwc = options.layout == frontend::ImageLayout::kNHWC;
  if (args.winograd && !nhwc && args.winograd_flag && args.winograd_flag->count() > 0)
    fail("--winograd rewrites NHWC convolutions: use it with --layout NHWC (the default)");
  // Winograd is on by default, for the default layout: NCHW alone turns it off.
  options.winograd = args.winograd && nhwc;
  return options;
}

std::string compile_command_line(const PipelineArgs &args, const std::string &db, const std::string &target) {
  std::string line = "kiln compile --model " + shell_quote(args.model);
  for (const std::string &shape : args.shapes) line += " --shape " + shell_quote(shape);
  std::string flags = pipeline_options(args).flags();
  if (!flags.empty()) line += " " + flags;
  if (db != kDefaultDatabase) line += " --db " + shell_quote(db);
  if (!target.empty()) line += " --target " + shell_quote(target);
  std::filesystem::path model(args.model);
  return line + " -o " + shell_quote(model.stem().string() + ".kiln");
}

frontend::PreparedModel prepare_model(const PipelineArgs &args) {
  frontend::PipelineOptions options = pipeline_options(args);
  frontend::Graph graph;
  try {
    graph = frontend::import_onnx_file(args.model, options_from(args));
  } catch (const frontend::ImportError &e) {
    fail(e.what());
  }
  try {
    return frontend::prepare(std::move(graph), options);
  } catch (const std::invalid_argument &e) {
    fail(e.what());
  }
}

}  // namespace kiln::cli
