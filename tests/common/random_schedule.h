// Random schedule steps shared by the property tests of the IR and of code generation.
#pragma once

#include <random>
#include <string>

#include "ir/schedule/schedule.h"

namespace kiln::test_support {

/// Tries one random primitive with random arguments on `sch` and returns its name.
/// Illegal choices throw ir::ScheduleError, which leaves the schedule unchanged.
std::string random_step(ir::Schedule &sch, std::mt19937_64 &rng);

}  // namespace kiln::test_support
