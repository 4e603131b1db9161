// Record helpers: mean latency, version, workload hash.

#include "database/record.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "database/error.h"

#include "support/json_read.h"
#include "support/sha256.h"

#include <array>
#include <numeric>
#include <utility>

namespace kiln::db {

double Record::mean_latency() const {
  const std::vector<double> &l = latencies();
  if (l.empty()) return 0.0;
  return std::accumulate(l.begin(), l.end(), 0.0) / static_cast<double>(l.size());
}

nlohmann::json parse_trace(const Record &record) {
  try {
    return kiln::support::parse_json(record.trace_json);
  } catch (const nlohmann::json::exception &e) {
    std::string what = e.what();
    // nlohmann's prefix ("[json.exception.parse_error.101] ") says nothing to a reader.
    if (size_t bracket = what.find("] "); what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    throw DbError("record " + std::to_string(record.id) + " (workload " + record.workload.op_summary + ", key " +
                  record.workload.key_hash.substr(0, 16) + ", target '" + record.target +
                  "') has a trace that is not JSON (" + what +
                  "): the database was changed outside Kiln or is damaged; delete the record, or export what "
                  "still reads and import it into a new database");
  }
}

std::string_view kiln_version() { return KILN_VERSION_STRING; }

std::string workload_hash_of(std::string_view canonical_json) { return support::sha256_hex(canonical_json); }

std::string workload_hash_from_argument(std::string_view workload) {
  size_t first = workload.find_first_not_of(" \t\r\n");
  auto excerpt = [&] { return std::string(workload.substr(0, 80)) + (workload.size() > 80 ? "..." : ""); };
  if (first != std::string_view::npos && workload[first] == '{') {
    try {
      nlohmann::json parsed = kiln::support::parse_json(workload);
      static_cast<void>(parsed);
    } catch (const nlohmann::json::exception &e) {
      throw DbInvalidArgument("bad workload '" + excerpt() + "': not valid JSON (" + e.what() + ")");
    }
    return workload_hash_of(workload);
  }
  bool hex = workload.size() == 64 && std::all_of(workload.begin(), workload.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
             });
  if (!hex)
    throw DbInvalidArgument("bad workload '" + excerpt() +
                            "': expected a key hash (64 lowercase hex digits) or the canonical workload JSON");
  return std::string(workload);
}

}  // namespace kiln::db
