// Flag validators that say the allowed range in words. CLI11's own number checks let
// "nan" through (every comparison with NaN is false) and print DBL_MAX in full.
// Header-only, in support/ (below every library): the CLI and the slim runner's command
// (rpc/runner_command.cc) both use them.
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln::support {

/// `text` with its control characters written as escapes (\x1b, \r, \x7f), for
/// messages that echo what a user typed: an ANSI escape in a flag's value must not
/// recolor or clear the terminal, nor a carriage return hide the message. Newlines and
/// tabs stay as they are; other bytes (UTF-8 included) pass unchanged.
inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '\r') {
      out += "\\r";
    } else if ((byte < 0x20 && c != '\n' && c != '\t') || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

/// CLI11's message for a bad flag, with printable() applied (the flag's value is in it).
inline std::string printable_failure_message(const CLI::App *app, const CLI::Error &e) {
  return printable(CLI::FailureMessage::simple(app, e));
}

/// A finite number in [low, high].
inline CLI::Validator finite_range(double low, double high) {
  char range[96];
  std::snprintf(range, sizeof range, "%g to %g", low, high);
  std::string allowed = range;
  return CLI::Validator(
      [low, high, allowed](std::string &text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value)) {
          return "'" + text + "' is not a finite number; give one from " + allowed;
        }
        if (value < low || value > high) return "'" + text + "' is out of range; give a number from " + allowed;
        return "";
      },
      "NUMBER " + allowed);
}

/// An integer of at least `low` (and at most `high`).
inline CLI::Validator at_least(int64_t low, int64_t high = INT64_MAX) {
  std::string allowed = high == INT64_MAX ? "at least " + std::to_string(low)
                                          : "from " + std::to_string(low) + " to " + std::to_string(high);
  return CLI::Validator(
      [low, high, allowed](std::string &text) -> std::string {
        int64_t value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a whole number; give one " + allowed;
        if (value < low || value > high) return "'" + text + "' is out of range; give a whole number " + allowed;
        return "";
      },
      "INT " + allowed);
}

/// Every option of `app` and its subcommands that takes unsigned numbers refuses a
/// leading '-': CLI11 converts "-1" to the largest unsigned value, so `--seed -1` or
/// `--constant -1` would be taken as 18446744073709551615. Call once all options exist.
inline void refuse_negative_unsigned(CLI::App &app) {
  for (CLI::Option *option : app.get_options()) {
    if (option->get_type_name().rfind("UINT", 0) != 0) continue;
    option->check(CLI::Validator(
        [](std::string &text) -> std::string {
          size_t first = text.find_first_not_of(" \t");
          if (first != std::string::npos && text[first] == '-')
            return "'" + text + "' is negative; give a whole number of 0 or more";
          return "";
        },
        ""));
  }
  for (CLI::App *command : app.get_subcommands([](CLI::App *) { return true; })) refuse_negative_unsigned(*command);
}

/// Seconds for timeouts and deadlines: positive, finite, at most a day (longer ones
/// overflow clock arithmetic and are mistakes anyway).
inline CLI::Validator seconds() { return finite_range(1e-3, 86400); }

}  // namespace kiln::support
