// `--dim` arguments (first line) and, when the input has more lines, the JSON file of
// expected values the argument names (the rest, written to a file and appended to the
// argument as @FILE): either parsed or refused with std::invalid_argument, and a parsed
// range's buckets are ascending, end at its maximum and share the calls out exactly.
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "frontend/dynamic_shapes.h"
#include "tests/fuzz/fuzz_helpers.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

const kiln::testing::ScratchFolder scratch("kiln_dim_spec_fuzz");
using kiln::testing::require;

}  // namespace

KILN_FUZZ_TARGET(dim_spec) {
  size_t newline = input.find('\n');
  std::string spec = input.substr(0, newline);
  if (newline != std::string::npos) {
    // The argument names the file; only this target's own file is ever read.
    if (spec.find('@') != std::string::npos) return;
    std::filesystem::path file = scratch.path() / "expected.json";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << input.substr(newline + 1);
    spec += "@" + file.string();
  } else if (size_t at = spec.find('@');
             at != std::string::npos && spec.find_first_not_of("0123456789,", at + 1) != std::string::npos) {
    return;  // a file name typed on the command line: not this target's to open
  }
  kiln::frontend::DimRange range;
  try {
    range = kiln::frontend::parse_dim_range(spec);
  } catch (const std::invalid_argument &) {
    return;
  }
  require(!range.name.empty() && range.min >= 1 && range.min <= range.max, "a parsed range without values");
  int count = 1 + static_cast<int>(input.size() % 8);
  std::vector<int64_t> buckets = kiln::frontend::choose_buckets(range, count);
  require(!buckets.empty() && static_cast<int>(buckets.size()) <= count, "bucket count");
  require(buckets.back() == range.max, "the last bucket is not the range's maximum");
  for (size_t i = 0; i < buckets.size(); ++i)
    require(buckets[i] >= range.min && (i == 0 || buckets[i] > buckets[i - 1]), "buckets not ascending in range");
  std::vector<double> shares = kiln::frontend::bucket_probabilities(range, buckets);
  double total = 0;
  for (double s : shares) {
    require(std::isfinite(s) && s >= 0, "a bucket's share is not a probability");
    total += s;
  }
  require(shares.size() == buckets.size() && std::abs(total - 1) < 1e-6, "bucket shares do not add up to 1");
}
