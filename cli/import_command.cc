#include "cli/import_command.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/workload_args.h"
#include "frontend/fusion.h"
#include "frontend/onnx_import.h"
#include "frontend/passes.h"
#include "frontend/tasks.h"

namespace kiln::cli {

namespace {

struct ImportArgs {
  std::string model;
  std::vector<std::string> shapes;
  bool json = false;
};

frontend::ImportOptions options_from(const ImportArgs &args) {
  frontend::ImportOptions options;
  for (const std::string &spec : args.shapes) {
    size_t eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0)
      fail("--shape '" + spec + "' must look like NAME=DIMS, e.g. input=1x3x224x224");
    try {
      options.input_shapes[spec.substr(0, eq)] = ir::parse_shape(spec.substr(eq + 1));
    } catch (const std::invalid_argument &e) {
      fail("--shape '" + spec + "': " + e.what());
    }
  }
  return options;
}

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
  auto args = std::make_shared<ImportArgs>();
  auto *cmd = app.add_subcommand("import", "Import an ONNX model: print its graph after the passes, its fused subgraphs and its tuning tasks");
  cmd->add_option("--model", args->model, "ONNX model file (opsets 11-17, weights inside the file)")->required();
  cmd->add_option("--shape", args->shapes,
                  "NAME=DIMS: fix a graph input's shape (needed for dynamic dimensions), e.g. input=1x3x224x224");
  cmd->add_flag("--json", args->json, "print the graph and the tasks as one JSON object");
  cmd->callback([args] {
    frontend::Graph graph;
    try {
      graph = frontend::import_onnx_file(args->model, options_from(*args));
    } catch (const frontend::ImportError &e) {
      fail(e.what());
    }
    frontend::run_default_passes(graph);
    std::vector<frontend::Subgraph> subgraphs = frontend::fuse(graph);
    std::vector<frontend::Task> tasks = frontend::extract_tasks(subgraphs);
    if (args->json) {
      nlohmann::json out{{"graph", graph.to_json()}, {"subgraphs", nlohmann::json::array()},
                         {"tasks", nlohmann::json::array()}};
      for (const frontend::Subgraph &s : subgraphs) out["subgraphs"].push_back(s.workload.summary());
      for (const frontend::Task &t : tasks)
        out["tasks"].push_back({{"key_hash", t.key_hash}, {"summary", t.workload.summary()}, {"weight", t.weight},
                                {"flops", t.flops}, {"workload", t.workload.to_json()}});
      std::cout << out.dump(2) << '\n';
      return;
    }
    std::cout << graph.to_string();
    std::cout << '\n' << subgraphs.size() << " subgraphs:\n";
    for (size_t i = 0; i < subgraphs.size(); ++i) std::cout << "  " << i << ": " << subgraphs[i].workload.summary() << '\n';
    print_tasks(tasks);
  });
}

}  // namespace kiln::cli
