// `kiln db ...`: look up, inspect, move and shrink tuning databases.

#pragma once

#include <iosfwd>

namespace CLI {
class App;
}

namespace kiln::cli {

/// Registers `kiln db best|top|stats|export|import|prune` on `app`, writing
/// results to stdout and errors to stderr.
///
/// Exit codes: 0 success; 1 bad database, input or flag value (message on
/// stderr); 2 `best`/`top` found no successful record; CLI11's own codes
/// (>= 100) for unknown or missing flags.
void add_db_commands(CLI::App &app);

/// The same, writing to the given streams (for tests and embedding).
void add_db_commands(CLI::App &app, std::ostream &out, std::ostream &err);

}  // namespace kiln::cli
