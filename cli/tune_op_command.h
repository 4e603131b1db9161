// `kiln tune-op`: tune one operator (or a workload file) end to end; the tuning flags it
// shares with `kiln tune --model`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "measure/host_runner.h"
#include "measure/runner.h"
#include "rpc/client_args.h"
#include "scheduler/task_tuner.h"
#include "target/target.h"

namespace CLI {
class App;
}

namespace kiln::cli {

void add_tune_op_command(CLI::App &app);

/// The tuning flags `kiln tune-op` and `kiln tune --model` share. The tuner's own
/// settings are bound to `options` directly, so their defaults are the tuner's
/// (scheduler::TuneOptions and the structs it holds); the rest are the CLI's.
struct TuningArgs {
  /// Empty: this host for the local runner, the key's runners for a tracker.
  std::string target;
  /// local, or tracker://HOST:PORT/KEY.
  std::string runner = "local";
  rpc::ClientArgs tracker_client;  ///< --token-file, --tls-ca, --insecure
  double queue_deadline = 600;
  double run_timeout = 10;
  /// Local runner: address space one candidate's run may add.
  int64_t memory_limit_mb = 4096;
  /// interleaved (a batch's repeats round-robin in one process) or alone.
  std::string timing_mode = "interleaved";
  std::string db = "kiln.db";  ///< common_flags.h's kDefaultDatabase, which kiln compile reads
  int builders = 2;
  std::string cost_model = "xgb";
  /// The XGBoost model's loss: squared (Ansor's pack-sum) or rank.
  std::string cost_model_loss = "rank";
  bool quiet = false;
  scheduler::TuneOptions options;
};
void add_tuning_flags(CLI::App *cmd, TuningArgs &args);
std::unique_ptr<costmodel::CostModel> make_cost_model(const TuningArgs &args, const Target &target);
/// The runner --runner names, and the target when --target was not given (asking the
/// tracker for a remote key's). Call it first: a local runner forks its server, which
/// must happen before the process starts threads. Exits with a message on bad flags.
std::unique_ptr<measure::Runner> make_runner(TuningArgs &args);
/// This host's runner for `target` (measure::make_host_runner); exits with the reason
/// and the way out (a device behind a tracker) when this host cannot measure it: the
/// local runner would only store load errors, and a GPU runner needs the target's GPU.
std::unique_ptr<measure::Runner> make_host_runner(const std::string &target, const measure::HostRunnerOptions &options);
/// A warning on stderr when resuming passed over records the database could not read.
void warn_about_passed_over_records(const std::vector<std::string> &messages);

}  // namespace kiln::cli
