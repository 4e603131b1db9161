// The compile pipeline: what turns an imported graph into the fused subgraphs whose
// workload keys tuning stores and compiling looks up. `kiln tune`, `kiln compile` and
// `kiln import` all go through `prepare`, so the same options give the same keys; the
// options are recorded in compiled models (model.json) and in tuning records, so a
// compile can tell when a database was tuned with other ones.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontend/fusion.h"
#include "frontend/graph.h"

namespace kiln::frontend {

enum class ImageLayout { kNCHW, kNHWC };

/// "NCHW" / "NHWC", and back (std::invalid_argument for anything else).
const char *to_string(ImageLayout layout);
ImageLayout parse_image_layout(const std::string &name);

/// Every choice that changes a model's workload keys.
struct PipelineOptions {
  /// The layout convolutions and pools run in (frontend/README.md).
  ImageLayout layout = ImageLayout::kNHWC;
  /// 3x3 stride-1 convolutions as Winograd, where that pays; NHWC only.
  bool winograd = true;
  /// Weights are constants of their tasks: programs may read them packed ahead of time.
  bool layout_rewrite = true;

  bool operator==(const PipelineOptions &) const = default;

  /// {"layout":"NHWC","layout_rewrite":true,"winograd":true}: what model.json and
  /// records' metadata store.
  nlohmann::json to_json() const;
  /// Throws std::invalid_argument naming what is wrong.
  static PipelineOptions from_json(const nlohmann::json &j);
  /// The `kiln compile` / `kiln tune` flags that select these options, e.g.
  /// "--layout NCHW --no-layout-rewrite" ("" for the defaults).
  std::string flags() const;
};

/// A model after the pipeline: the rewritten graph and its fused subgraphs, in the
/// order they run.
struct PreparedModel {
  Graph graph;
  std::vector<Subgraph> subgraphs;
  PipelineOptions options;
};

/// Runs the default passes, the layout conversion, the Winograd rewrite and fusion, as
/// `options` say. Throws std::invalid_argument for Winograd without NHWC.
PreparedModel prepare(Graph graph, const PipelineOptions &options);

}  // namespace kiln::frontend
