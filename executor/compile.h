// Compiling a model: every fused subgraph built with its best tuned schedule from the
// database (exact target first, then the same-device fallback), or with the untuned
// default (inlined element-wise producers, parallel outer and vectorized inner loops),
// into a folder that executor::Model loads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/fusion.h"
#include "frontend/graph.h"

namespace kiln::executor {

struct CompileOptions {
  std::string target = "llvm -mcpu=native";
  std::string db_path;  ///< empty: no database, every subgraph gets the untuned default
};

struct CompileReport {
  size_t subgraphs = 0;
  size_t tuned = 0;    ///< built from a database record
  size_t untuned = 0;  ///< built with the default schedule
  double seconds = 0;
  int64_t arena_bytes = 0;      ///< activations after memory planning
  int64_t unplanned_bytes = 0;  ///< activations with one buffer each
};

/// Builds `graph` (after fusion into `subgraphs`) into the folder `out_dir` (created;
/// an existing model there is replaced). `progress` is told each finished subgraph.
CompileReport compile_model(const frontend::Graph &graph, const std::vector<frontend::Subgraph> &subgraphs,
                            const CompileOptions &options, const std::string &out_dir,
                            const std::function<void(size_t done, size_t total)> &progress = {});

}  // namespace kiln::executor
