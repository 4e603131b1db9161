// The model commands, one file each: `kiln import` (graph and tasks of an ONNX model),
// `kiln tune` (tune a model's tasks), `kiln compile` (a runnable folder), `kiln run`
// and `kiln bench` (a compiled model).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln::cli {

void add_import_command(CLI::App &app);
void add_tune_model_command(CLI::App &app);
void add_compile_command(CLI::App &app);
void add_run_command(CLI::App &app);
/// "1.234 ms" from a millisecond; "56.7 us" below a millisecond (small models).
std::string format_ms(double ms);
void add_bench_command(CLI::App &app);
/// `kiln export`: a workload's best record as an object file and a C header.
void add_export_command(CLI::App &app);

}  // namespace kiln::cli
