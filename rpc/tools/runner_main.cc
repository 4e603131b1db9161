// kiln-runner: the runner daemon alone (`kiln runner` without the compiler), for the
// boards that measure. See rpc/README.md.
#include <CLI/CLI.hpp>

#include "rpc/runner_command.h"
#include "support/flag_checks.h"

int main(int argc, char **argv) {
  CLI::App app{"kiln-runner: serve measurements for a Kiln tracker"};
  app.failure_message(kiln::support::printable_failure_message);
  kiln::rpc::add_runner_command(app, /*as_main=*/true);
  kiln::support::refuse_negative_unsigned(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
