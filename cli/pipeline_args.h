// The flags that choose how a model is imported and prepared (frontend::prepare):
// the model file, fixed input shapes, the image layout, Winograd and layout rewrite.
// `kiln import`, `kiln tune` and `kiln compile` share them.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "executor/dynamic_model.h"
#include "frontend/dynamic_shapes.h"
#include "frontend/pipeline.h"

namespace kiln::cli {

struct PipelineArgs {
  std::string model;
  std::vector<std::string> shapes;
  std::vector<std::string> dims;  ///< --dim NAME=VALUE or NAME=MIN..MAX[@SAMPLES]
  int buckets = 8;                ///< most buckets per dynamic dimension
  bool split = true;              ///< calls of a dimension whose rows never meet run as up to two buckets
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
/// Fails for a model with dynamic dimensions (a --dim range): see plan_dynamic.
frontend::PreparedModel prepare_model(const PipelineArgs &args);

/// Whether some --dim gives a range: the model is compiled and tuned as buckets.
bool has_dynamic_dims(const PipelineArgs &args);

/// A model with dynamic dimensions: which axes follow them, and its buckets.
struct DynamicPlan {
  frontend::SymbolicGraph symbolic;
  executor::DynamicManifest manifest;  ///< dims, inputs, outputs, buckets
  std::vector<double> bucket_weights;  ///< how often a call runs each bucket, on average
  /// Why calls run one bucket each, for a model of one dynamic dimension whose calls are
  /// not split (frontend::rows_interact, or --no-split); empty when they are split.
  std::string not_split;
};

/// Finds the dynamic axes and chooses the buckets; fails with a message saying what
/// cannot be compiled dynamically and what to do.
DynamicPlan plan_dynamic(const PipelineArgs &args);

/// Bucket `i` of the plan, imported, masked and through the pipeline.
frontend::PreparedModel prepare_bucket(const PipelineArgs &args, const DynamicPlan &plan, size_t i);

}  // namespace kiln::cli
