// Checks on JSON read from outside before integers are taken out of it: nlohmann's
// get<int64_t>() of a floating-point or too-large number is undefined behaviour.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln::ir {

/// Throws std::invalid_argument, naming `what`, when `j` holds a number anywhere that
/// is not an integer representable as int64 (1.5, 1e30, 2^64 − 1).
inline void require_int64_numbers(const nlohmann::json &j, const std::string &what) {
  if (j.is_number_float()) {
    throw std::invalid_argument(what + " must hold whole numbers only, not " + j.dump().substr(0, 32));
  }
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    throw std::invalid_argument(what + " holds " + j.dump() + ", beyond 2^63 - 1");
  }
  if (j.is_structured()) {
    for (const nlohmann::json &element : j) require_int64_numbers(element, what);
  }
}

}  // namespace kiln::ir
