// One monotonic clock reading in seconds, for durations and progress rates.
#pragma once

#include <chrono>

namespace kiln::support {

/// Seconds on the steady clock: only differences mean anything.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kiln::support
