// C identifiers: the names Kiln gives symbols that other programs link against
// (`kiln export --name`, codegen::Compiler::build_object).
#pragma once

#include <cctype>
#include <string_view>

namespace kiln::support {

/// Letters, digits and '_', not starting with a digit, not empty.
inline bool is_c_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

}  // namespace kiln::support
