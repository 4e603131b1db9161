// The flags that choose how a model is imported and prepared (frontend::prepare):
// the model file, fixed input shapes, the image layout, Winograd and layout rewrite.
// `kiln import`, `kiln tune` and `kiln compile` share them.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "frontend/pipeline.h"

namespace kiln::cli {

struct PipelineArgs {
  std::string model;
  std::vector<std::string> shapes;
  bool layout_rewrite = true;
  std::string image_layout = "NHWC";
  bool winograd = true;
  CLI::Option *winograd_flag = nullptr;  // to tell an explicit --winograd from the default
};

void add_pipeline_flags(CLI::App &cmd, PipelineArgs &args);

/// The pipeline options the flags select; fails (exits with a message) on a
/// contradiction such as --winograd with --layout NCHW.
frontend::PipelineOptions pipeline_options(const PipelineArgs &args);

/// The `kiln compile` command line that builds the model `args` name with what a tune
/// stored in `db`: the same shapes and pipeline flags, the database and target when they
/// are not compile's defaults (`target` empty: this host), into NAME.kiln here.
std::string compile_command_line(const PipelineArgs &args, const std::string &db, const std::string &target);

/// Imports the model and runs the pipeline; fails with the importer's message.
frontend::PreparedModel prepare_model(const PipelineArgs &args);

}  // namespace kiln::cli
