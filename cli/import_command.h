// `kiln import`: reads an ONNX model and prints the graph and its tuning tasks.
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_import_command(CLI::App &app);

}  // namespace kiln::cli
