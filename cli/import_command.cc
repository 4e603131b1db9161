#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <cstdio>
#include <iostream>
#include <memory>

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

}  // namespace

void add_import_command(CLI::App &app) {
  auto args = std::make_shared<PipelineArgs>();
  auto json = std::make_shared<bool>(false);
  auto *cmd = app.add_subcommand(
      "import", "Import an ONNX model: print its graph after the passes, its fused subgraphs and its tuning tasks");
  add_pipeline_flags(*cmd, *args);
  cmd->add_flag("--json", *json, "print the graph, the subgraphs and the tasks as one JSON object");
  cmd->callback([args, json] {
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
