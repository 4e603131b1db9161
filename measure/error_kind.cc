#include "measure/error_kind.h"

#include <array>

namespace kiln::measure {

static constexpr std::array<ErrorKind, 7> kAllKinds = {
    ErrorKind::none,          ErrorKind::build_error, ErrorKind::build_timeout, ErrorKind::load_error,
    ErrorKind::runtime_error, ErrorKind::run_timeout, ErrorKind::wrong_result};

const char *to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::none:
      return "none";
    case ErrorKind::build_error:
      return "build_error";
    case ErrorKind::build_timeout:
      return "build_timeout";
    case ErrorKind::load_error:
      return "load_error";
    case ErrorKind::runtime_error:
      return "runtime_error";
    case ErrorKind::run_timeout:
      return "run_timeout";
    case ErrorKind::wrong_result:
      return "wrong_result";
  }
  return "unknown";
}

std::optional<ErrorKind> error_kind_from_string(std::string_view name) {
  for (ErrorKind kind : kAllKinds) {
    if (name == to_string(kind)) return kind;
  }
  return std::nullopt;
}

}  // namespace kiln::measure
