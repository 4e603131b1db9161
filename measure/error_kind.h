// How a measurement failed. The names are the database's (database/record.h), so a
// result can be stored without translation.
#pragma once

#include <optional>
#include <string_view>

namespace kiln::measure {

enum class ErrorKind {
  none,           // built (and, for a run, checked and timed) successfully
  build_error,    // codegen rejected the program, or the compiler failed or crashed
  build_timeout,  // the build exceeded the builder's timeout and was killed
  load_error,     // the artifact could not be loaded: bad file, missing symbol, bad info JSON
  runtime_error,  // the candidate crashed (signal), returned non-zero or ran out of memory
  run_timeout,    // the candidate exceeded the run timeout and was killed
  wrong_result,   // the output differs from the reference
};

/// "none", "build_error", ... (the database's spelling).
const char *to_string(ErrorKind kind);
/// Inverse of to_string; nullopt for any other text.
std::optional<ErrorKind> error_kind_from_string(std::string_view name);

}  // namespace kiln::measure
