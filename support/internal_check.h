// Invariants of Kiln itself, as opposed to errors in its input: a failed check is a
// bug in Kiln, reported with the place and the broken condition so that it can be
// filed, never a message that blames the user.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

[[noreturn]] inline void internal_check_failed(const char *condition, const char *file, int line,
                                               const std::string &message) {
  throw InternalError(std::string("internal error (a bug in Kiln, please report it): ") + file + ":" +
                      std::to_string(line) + ": " + condition + (message.empty() ? "" : ": " + message));
}

}  // namespace kiln

/// KILN_INTERNAL_CHECK(levels.size() == 7, "tiling levels") throws kiln::InternalError
/// when the condition is false.
#define KILN_INTERNAL_CHECK(condition, message) \
  ((condition) ? static_cast<void>(0) : ::kiln::internal_check_failed(#condition, __FILE__, __LINE__, (message)))
