// The runner's fork server: a single-threaded process, forked from the tuner when the
// LocalRunner is created, that forks one throw-away child per reference or candidate
// run and turns how that child ended into a RunResult. Internal to measure/.
#pragma once

#include <cstdint>
#include <string>

#include "measure/sandbox.h"

namespace kiln::measure::detail {

struct ServerOptions {
  double run_timeout_seconds = 10;
  int64_t memory_limit_bytes = 0;
  int num_threads = 0;
  int64_t reference_cache_bytes = 0;
  /// Loaded with RTLD_GLOBAL at start unless the process already provides kiln_rt_*.
  std::string runtime_library;
  /// Candidates (and references) run in a sandbox (measure/sandbox.h).
  SandboxOptions sandbox;
};

/// Serves requests (RunInput JSON frames) on `socket` until the peer closes it.
void serve(int socket, const ServerOptions &options);

}  // namespace kiln::measure::detail
