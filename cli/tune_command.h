// `kiln tune-op`: tune one operator (or a workload file) end to end; the tuning flags it
// shares with `kiln tune --model`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "costmodel/cost_model.h"
#include "measure/runner.h"
#include "scheduler/task_tuner.h"

namespace CLI {
class App;
}

namespace kiln::cli {

void add_tune_command(CLI::App &app);

/// The tuning flags `kiln tune-op` and `kiln tune --model` share; their defaults are
/// the fields' initializers.
struct TuningArgs {
  /// Empty: this host for the local runner, the key's runners for a tracker.
  std::string target;
  /// local, or tracker://HOST:PORT/KEY.
  std::string runner = "local";
  std::string tracker_token_file;
  std::string tracker_tls_ca;
  bool tracker_insecure = false;
  double queue_deadline = 600;
  double run_timeout = 10;
  std::string db = "kiln.db";
  int64_t trials = 1000;
  int batch = 32;
  double time_limit = 0;
  uint64_t seed = 0;
  int builders = 2;
  std::string cost_model = "xgb";
  int population = 128;
  int generations = 3;
  double eps = 0.05;
  int repeat = 3;
  double min_repeat_ms = 10;
  double give_up_factor = 3.0;
  int confirm_top = 8;
  int confirm_runs = 3;
  bool warm_start = false;
  bool quiet = false;
};
void add_tuning_flags(CLI::App *cmd, TuningArgs &args);
scheduler::TuneOptions tune_options(const TuningArgs &args);
std::unique_ptr<costmodel::CostModel> make_cost_model(const TuningArgs &args);
/// The runner --runner names, and the target when --target was not given (asking the
/// tracker for a remote key's). Call it first: a local runner forks its server, which
/// must happen before the process starts threads. Exits with a message on bad flags.
std::unique_ptr<measure::Runner> make_runner(TuningArgs &args);

}  // namespace kiln::cli
