// How a measurement failed: one vocabulary for the builder, the runners, the tracker's
// messages and the database, which stores these names ("build_error", ...). In
// support/, below every library, so that the measurement and the database share it
// without either depending on the other.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace kiln::support {

enum class ErrorKind {
  kNone,          // built (and, for a run, checked and timed) successfully
  kBuildError,    // codegen rejected the program, or the compiler failed or crashed
  kBuildTimeout,  // the build exceeded the builder's timeout and was killed
  kLoadError,     // the artifact could not be loaded: bad file, missing symbol, bad info JSON
  kRuntimeError,  // the candidate crashed (signal), returned non-zero or ran out of memory
  kRunTimeout,    // the candidate exceeded the run timeout and was killed
  kWrongResult,   // the output differs from the reference
  // The measurement, not the program, failed: its runner was lost, the tracker failed or
  // the job was cancelled. Never evidence against the program: it is measured again.
  kInfrastructure,
};

/// "none", "build_error", ... (the stored spelling).
inline const char *to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kBuildError:
      return "build_error";
    case ErrorKind::kBuildTimeout:
      return "build_timeout";
    case ErrorKind::kLoadError:
      return "load_error";
    case ErrorKind::kRuntimeError:
      return "runtime_error";
    case ErrorKind::kRunTimeout:
      return "run_timeout";
    case ErrorKind::kWrongResult:
      return "wrong_result";
    case ErrorKind::kInfrastructure:
      return "infrastructure_error";
  }
  return "unknown";
}

/// Inverse of to_string; nullopt for any other text.
inline std::optional<ErrorKind> error_kind_from_string(std::string_view name) {
  constexpr std::array<ErrorKind, 8> kAll = {
      ErrorKind::kNone,         ErrorKind::kBuildError, ErrorKind::kBuildTimeout, ErrorKind::kLoadError,
      ErrorKind::kRuntimeError, ErrorKind::kRunTimeout, ErrorKind::kWrongResult,  ErrorKind::kInfrastructure};
  for (ErrorKind kind : kAll)
    if (name == to_string(kind)) return kind;
  return std::nullopt;
}

}  // namespace kiln::support
