// The scheduler tests' one local runner, shared by every test file of the binary and
// forked (in a static initializer of each file) before any test starts threads.
#pragma once

#include "measure/local_runner.h"

namespace kiln::scheduler {

inline measure::LocalRunner &test_runner() {
  static measure::LocalRunner r;
  return r;
}

}  // namespace kiln::scheduler
