// Reading JSON that a user or another machine wrote. Every document Kiln reads goes
// through parse_json: nesting is bounded, because a document nested a hundred thousand
// levels deep parses (the parser keeps its own stack) but overflows the call stack as
// soon as it is printed, compared or copied — in an error message, say.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "support/json_checks.h"

namespace kiln::support {

/// A document nested deeper than parse_json allows. A json::exception, so every caller
/// that reports a damaged document reports this one the same way.
class JsonTooDeep : public nlohmann::json::exception {
 public:
  explicit JsonTooDeep(size_t max_depth)
      : nlohmann::json::exception(
            0, ("the JSON nests deeper than " + std::to_string(max_depth) + " levels: Kiln reads no such document")
                   .c_str()) {}
};

/// nlohmann::json::parse, refusing nesting deeper than `max_depth` (JsonTooDeep) before
/// the document is built. `input`: anything json::parse takes (a string, a stream, …).
template <typename Input>
nlohmann::json parse_json(Input &&input, size_t max_depth = kMaxJsonDepth) {
  return nlohmann::json::parse(std::forward<Input>(input), [max_depth](int depth, nlohmann::json::parse_event_t event,
                                                                       nlohmann::json &) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        static_cast<size_t>(depth) >= max_depth)
      throw JsonTooDeep(max_depth);
    return true;
  });
}

/// The same, without exceptions for malformed text: a discarded value (is_discarded())
/// as json::parse(input, nullptr, false) gives; for a document too deep as well.
template <typename Input>
nlohmann::json parse_json_or_discarded(Input &&input, size_t max_depth = kMaxJsonDepth) {
  try {
    return parse_json(std::forward<Input>(input), max_depth);
  } catch (const nlohmann::json::exception &) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
}

}  // namespace kiln::support
