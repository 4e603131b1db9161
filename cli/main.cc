// The `kiln` command: parses flags and calls library code.
#include <CLI/CLI.hpp>

#include "cli/costmodel_command.h"
#include "cli/db_command.h"
#include "cli/model_commands.h"
#include "cli/ir_commands.h"
#include "cli/measure_command.h"
#include "cli/tracker_commands.h"
#include "cli/tune_command.h"

int main(int argc, char **argv) {
  CLI::App app{"Kiln: an auto-tuner for tensor programs"};
  app.require_subcommand(1);
  kiln::cli::add_ir_commands(app);
  kiln::cli::add_model_commands(app);
  kiln::cli::add_measure_command(app);
  kiln::cli::add_tune_command(app);
  kiln::cli::add_db_commands(app);
  kiln::cli::add_costmodel_command(app);
  kiln::cli::add_tracker_commands(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
