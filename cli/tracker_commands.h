// `kiln tracker` (serve) and `kiln tracker status`; `kiln runner` (rpc/runner_command.h).
#pragma once

namespace CLI {
class App;
}

namespace kiln::cli {

void add_tracker_commands(CLI::App &app);

}  // namespace kiln::cli
