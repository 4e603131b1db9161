// The `kiln` command: parses flags and calls library code.
#include <CLI/CLI.hpp>

#include <iostream>
#include <new>
#include <string>

#include "cli/costmodel_command.h"
#include "cli/db_command.h"
#include "cli/ir_commands.h"
#include "cli/measure_command.h"
#include "cli/model_commands.h"
#include "cli/tracker_commands.h"
#include "cli/tune_op_command.h"
#include "codegen/runtime/abi.h"
#include "database/schema.h"
#include "executor/model.h"
#include "support/flag_checks.h"

int main(int argc, char **argv) {
  CLI::App app{"Kiln: an auto-tuner for tensor programs"};
  // What a bug report or a mismatched board needs: the release and the formats it reads.
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION + " (compiled models v" +
                                        std::to_string(kiln::executor::kModelFormatVersion) + ", artifact ABI " +
                                        std::to_string(KILN_ABI_VERSION) + ", database schema " +
                                        std::to_string(kiln::db::kSchemaVersion) + ")");
  app.require_subcommand(1);
  app.failure_message(kiln::support::printable_failure_message);
  kiln::cli::add_ir_commands(app);
  kiln::cli::add_import_command(app);
  kiln::cli::add_tune_model_command(app);
  kiln::cli::add_compile_command(app);
  kiln::cli::add_run_command(app);
  kiln::cli::add_bench_command(app);
  kiln::cli::add_export_command(app);
  kiln::cli::add_measure_command(app);
  kiln::cli::add_tune_op_command(app);
  kiln::cli::add_db_commands(app);
  kiln::cli::add_costmodel_command(app);
  kiln::cli::add_tracker_commands(app);
  kiln::support::refuse_negative_unsigned(app);
  // CLI11 would say only "A subcommand is required" for a misspelled one.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App *command : app.get_subcommands([](CLI::App *) { return true; })) {
      known = known || command->check_name(argv[1]);
      names += (names.empty() ? "" : ", ") + command->get_name();
    }
    if (!known) {
      std::cerr << "kiln: error: '" << kiln::support::printable(argv[1]) << "' is not a kiln command; the commands are "
                << names << " (kiln --help says what each does)\n";
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError &e) {
    return app.exit(e);  // a command's own failure, with the status it chose
  } catch (const CLI::ParseError &e) {
    // A bad flag: CLI11 prints why; the status is 1 like every other user error.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "kiln: error: out of memory: the tensors or the search are too large for this machine; use "
                 "smaller shapes\n";
    return 1;
  } catch (const std::exception &e) {
    // Every error a user can cause has its own message where it happens; this is the
    // net under the rest, so that nothing ends in an abort.
    std::cerr << "kiln: error: " << kiln::support::printable(e.what()) << "\n";
    return 1;
  }
  return 0;
}
