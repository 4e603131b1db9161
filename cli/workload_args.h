// Flags shared by the commands that take a task: --op/--shape/--dtype/--attrs or
// --workload FILE.
#pragma once

#include <string>
#include <vector>

#include "ops/workload.h"
#include "support/flag_checks.h"

namespace CLI {
class App;
}

namespace kiln::cli {

// The flag validators every command uses (support/flag_checks.h).
using support::at_least;
using support::finite_range;
using support::seconds;

struct WorkloadArgs {
  std::string op;
  std::vector<std::string> shapes;
  std::string dtype = "float32";
  std::string attrs = "{}";
  std::string workload_file;
  std::vector<size_t> constant_inputs;

  /// Registers the flags on a subcommand.
  void add_to(CLI::App &cmd);
  /// Builds and validates the workload; throws std::invalid_argument with a message
  /// that says what to fix.
  ops::Workload build() const;
};

/// Prints `message` as "kiln: error: ..." and exits the command with code 1.
[[noreturn]] void fail(const std::string &message);

}  // namespace kiln::cli
