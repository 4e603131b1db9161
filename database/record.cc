/// \file
/// Record helpers: error-kind names, mean latency, version, workload hash.

#include "database/record.h"

#include "ir/sha256.h"

#include <array>
#include <numeric>
#include <utility>

namespace kiln::db {

static constexpr std::array<std::pair<ErrorKind, std::string_view>, 6> kErrorKindNames = {{
    {ErrorKind::build_error, "build_error"},
    {ErrorKind::build_timeout, "build_timeout"},
    {ErrorKind::load_error, "load_error"},
    {ErrorKind::runtime_error, "runtime_error"},
    {ErrorKind::run_timeout, "run_timeout"},
    {ErrorKind::wrong_result, "wrong_result"},
}};

std::string_view to_string(ErrorKind kind) {
  for (const auto &[k, name] : kErrorKindNames)
    if (k == kind)
      return name;
  return "unknown";
}

std::optional<ErrorKind> error_kind_from_string(std::string_view name) {
  for (const auto &[k, n] : kErrorKindNames)
    if (n == name)
      return k;
  return std::nullopt;
}

double Record::mean_latency() const {
  const std::vector<double> &l = latencies();
  if (l.empty())
    return 0.0;
  return std::accumulate(l.begin(), l.end(), 0.0) / static_cast<double>(l.size());
}

std::string_view kiln_version() { return KILN_VERSION_STRING; }

std::string workload_hash_of(std::string_view canonical_json) { return sha256_hex(canonical_json); }

} // namespace kiln::db
