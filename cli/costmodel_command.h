// `kiln costmodel eval`: how well the cost model ranks the measured programs of a
// tuning database, on a held-out part.
#pragma once

namespace CLI {
class App;
}

namespace kiln::cli {

void add_costmodel_command(CLI::App &app);

}  // namespace kiln::cli
