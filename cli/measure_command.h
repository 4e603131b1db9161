// `kiln measure`: build a scheduled operator, check it and time it.
#pragma once

namespace CLI {
class App;
}

namespace kiln::cli {

void add_measure_command(CLI::App &app);

}  // namespace kiln::cli
