// Model commands: `kiln import` (graph and tasks of an ONNX model), `kiln compile`
// (a runnable folder), `kiln run` and `kiln bench` (a compiled model).
#pragma once

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_model_commands(CLI::App &app);

}  // namespace kiln::cli
