// `kiln tune-op`: tune one operator (or a workload file) end to end.
#pragma once

namespace CLI {
class App;
}

namespace kiln::cli {

void add_tune_command(CLI::App &app);

}  // namespace kiln::cli
