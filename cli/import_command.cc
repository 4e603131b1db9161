#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/pipeline_args.h"
#include "frontend/tasks.h"

namespace kiln::cli {

namespace {

void print_tasks(const std::vector<frontend::Task> &tasks) {
  double total = 0;
  for (const frontend::Task &t : tasks) total += t.flops * t.weight;
  std::printf("\n%-3s  %-12s  %-28s  %6s  %9s  %6s\n", "#", "key", "ops  shapes", "weight", "GFLOP", "share");
  for (size_t i = 0; i < tasks.size(); ++i) {
    const frontend::Task &t = tasks[i];
    double flops = t.flops * t.weight;
    std::printf("%-3zu  %-12s  %-28s  %6d  %9.4f  %5.1f%%\n", i, t.key_hash.substr(0, 12).c_str(),
                t.workload.summary().c_str(), t.weight, flops / 1e9, total > 0 ? 100.0 * flops / total : 0.0);
  }
  std::printf("%zu tasks, %.4f GFLOP per inference\n", tasks.size(), total / 1e9);
}

std::string axes_text(const executor::DynamicManifest &m, const executor::DynamicTensor &t) {
  std::string text;
  for (const executor::DynamicAxis &a : t.axes) {
    if (!text.empty()) text += "x";
    if (a.dim < 0)
      text += std::to_string(a.extent);
    else
      text += (a.scale != 1 ? std::to_string(a.scale) + "*" : "") + m.dims[static_cast<size_t>(a.dim)].name;
  }
  return text;
}

// A model with a dynamic dimension: which inputs and outputs follow it, its buckets,
// and the tasks of each.
void print_dynamic(const PipelineArgs &args) {
  DynamicPlan plan = plan_dynamic(args);
  const executor::DynamicManifest &m = plan.manifest;
  for (const executor::DynamicDim &d : m.dims)
    std::printf("dynamic dimension %s: %lld..%lld\n", d.name.c_str(), (long long)d.min, (long long)d.max);
  for (const executor::DynamicTensor &t : m.inputs)
    std::printf("input  %s: %s\n", t.name.c_str(), axes_text(m, t).c_str());
  for (const executor::DynamicTensor &t : m.outputs)
    std::printf("output %s: %s\n", t.name.c_str(), axes_text(m, t).c_str());
  if (m.dims.size() == 1 && m.dims[0].max_pieces > 1)
    std::printf("calls run as up to %d buckets, each on its rows along %s (they never meet)\n", m.dims[0].max_pieces,
                m.dims[0].name.c_str());
  else if (!plan.not_split.empty())
    std::printf("calls run one bucket each, padded (not split: %s)\n", plan.not_split.c_str());
  std::printf("\n%-20s %8s %9s %6s %6s\n", "bucket", "calls", "subgraphs", "tasks", "masks");
  for (size_t b = 0; b < m.buckets.size(); ++b) {
    frontend::PreparedModel bucket = prepare_bucket(args, plan, b);
    size_t masks = 0;
    for (const frontend::Node &n : bucket.graph.nodes)
      masks += n.op == "where" &&
               bucket.graph.values[static_cast<size_t>(n.output)].name.find(".masked") != std::string::npos;
    std::printf("%-20s %7.1f%% %9zu %6zu %6zu\n", m.bucket_folder(b).c_str(), 100 * plan.bucket_weights[b],
                bucket.subgraphs.size(), frontend::extract_tasks(bucket.subgraphs).size(), masks);
  }
}

}  // namespace

void add_import_command(CLI::App &app) {
  auto args = std::make_shared<PipelineArgs>();
  auto json = std::make_shared<bool>(false);
  auto *cmd = app.add_subcommand(
      "import", "Import an ONNX model: print its graph after the passes, its fused subgraphs and its tuning tasks");
  add_pipeline_flags(*cmd, *args);
  cmd->add_flag("--json", *json, "print the graph, the subgraphs and the tasks as one JSON object");
  cmd->callback([args, json] {
    if (has_dynamic_dims(*args)) {
      if (*json) fail("--json prints one graph: give every dimension a value (--dim NAME=VALUE) to see a bucket's");
      print_dynamic(*args);
      return;
    }
    auto [graph, subgraphs, options] = prepare_model(*args);
    std::vector<frontend::Task> tasks = frontend::extract_tasks(subgraphs);
    if (*json) {
      nlohmann::json out{{"graph", graph.to_json()},
                         {"subgraphs", nlohmann::json::array()},
                         {"tasks", nlohmann::json::array()},
                         {"pipeline", options.to_json()}};
      for (const frontend::Subgraph &s : subgraphs) out["subgraphs"].push_back(s.workload.summary());
      for (const frontend::Task &t : tasks)
        out["tasks"].push_back({{"key_hash", t.key_hash},
                                {"summary", t.workload.summary()},
                                {"weight", t.weight},
                                {"flops", t.flops},
                                {"workload", t.workload.to_json()}});
      std::cout << out.dump(2) << '\n';
      return;
    }
    std::cout << graph.to_string();
    std::cout << '\n' << subgraphs.size() << " subgraphs:\n";
    for (size_t i = 0; i < subgraphs.size(); ++i)
      std::cout << "  " << i << ": " << subgraphs[i].workload.summary() << '\n';
    print_tasks(tasks);
  });
}

}  // namespace kiln::cli
