// The `runner` subcommand, shared by the full `kiln` CLI and the slim `kiln-runner`
// executable built for boards.
#pragma once

namespace CLI {
class App;
}

namespace kiln::rpc {

/// Adds `runner` to `app` (as a subcommand), or, with `as_main`, makes `app` itself
/// the runner command (kiln-runner).
void add_runner_command(CLI::App &app, bool as_main = false);

}  // namespace kiln::rpc
