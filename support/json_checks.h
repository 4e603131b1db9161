// Checks on JSON read from outside before integers are taken out of it: nlohmann's
// get<int64_t>() of a floating-point or too-large number is undefined behaviour. Every
// document is parsed with support::parse_json (json_read.h), which bounds its nesting
// as kMaxJsonDepth does here.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::support {

/// At most `limit` characters of `text`, for messages that quote outside input.
inline std::string excerpt(const std::string &text, size_t limit = 80) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

/// At most `limit` characters of `j`'s text.
inline std::string json_excerpt(const nlohmann::json &j, size_t limit = 80) { return excerpt(j.dump(), limit); }

/// How deep JSON read from outside (traces, workloads) may nest: far above what Kiln
/// writes (a trace nests 4 deep, a workload 5), far below what would overflow the stack
/// of a recursive walk (printing, comparing, destroying).
inline constexpr size_t kMaxJsonDepth = 64;

/// Calls `visit` on every value of `j` (itself included), without recursion; throws
/// std::invalid_argument, naming `what`, when `j` nests deeper than kMaxJsonDepth.
template <typename Visit>
void walk_bounded(const nlohmann::json &j, const std::string &what, Visit &&visit) {
  std::vector<std::pair<const nlohmann::json *, size_t>> pending{{&j, 1}};
  while (!pending.empty()) {
    auto [node, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxJsonDepth)
      throw std::invalid_argument(what + " nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    visit(*node);
    if (node->is_structured())
      for (const nlohmann::json &element : *node) pending.push_back({&element, depth + 1});
  }
}

/// Throws std::invalid_argument, naming `what`, when `j` nests deeper than
/// kMaxJsonDepth.
inline void require_max_depth(const nlohmann::json &j, const std::string &what) {
  walk_bounded(j, what, [](const nlohmann::json &) {});
}

/// Throws std::invalid_argument, naming `what`, when `j` nests deeper than
/// kMaxJsonDepth or holds a number anywhere that is not an integer representable as
/// int64 (1.5, 1e30, 2^64 - 1).
inline void require_int64_numbers(const nlohmann::json &j, const std::string &what) {
  walk_bounded(j, what, [&](const nlohmann::json &node) {
    if (node.is_number_float())
      throw std::invalid_argument(what + " must hold whole numbers only, not " + node.dump().substr(0, 32));
    if (node.is_number_unsigned() && node.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw std::invalid_argument(what + " holds " + node.dump() + ", beyond 2^63 - 1");
  });
}

}  // namespace kiln::support
