// `kiln ops`, `kiln show` and `kiln demo`.
#pragma once

namespace CLI {
class App;
}

namespace kiln::cli {

void add_ir_commands(CLI::App &app);

}  // namespace kiln::cli
