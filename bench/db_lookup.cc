// Best-record lookup latency on a large database: fills a file with
// --records records over --workloads workloads and two targets, then times
// --lookups random best() calls, exact-target and fallback, and prints the
// median and p99 in microseconds.
//
// usage: kiln_bench_db_lookup [--records N] [--workloads N] [--lookups N] [--db FILE]

#include "database/database.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  long records = 1'000'000;
  long workloads = 10'000;
  long lookups = 100'000;
  std::string db;
};

const char *kTargets[] = {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=2",
                          "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2"};
// Has no records of its own: every lookup takes the same-device-kind fallback.
const char *kFallbackTarget = "llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server -num-cores=2";

}  // namespace

static std::string workload_json(long w) {
  return R"({"ops":[{"op":"conv2d","shape":[1,)" + std::to_string(64 + w % 512) +
         ",56,56],\"id\":" + std::to_string(w) + "}],\"version\":1}";
}

static double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

static void fill(kiln::db::Database &db, const Options &o, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> latency(1e-5, 1e-2);
  std::vector<std::string> workloads;
  for (long w = 0; w < o.workloads; ++w) workloads.push_back(workload_json(w));
  constexpr long kChunk = 100'000;  // bounds memory; each chunk is one transaction
  auto start = Clock::now();
  for (long first = 0; first < o.records; first += kChunk) {
    std::vector<kiln::db::Record> chunk;
    for (long i = first; i < std::min(o.records, first + kChunk); ++i) {
      kiln::db::Record r;
      r.workload.canonical_json = workloads[i % o.workloads];
      r.target = kTargets[(i / o.workloads) % 2];
      r.trace_json =
          R"({"insts":[{"kind":"split","factors":[)" + std::to_string(i % 64) + "," + std::to_string(i) + "]}]}";
      if ((i / o.workloads) % 10 == 9)  // every workload gets some errors
        r.outcome = kiln::db::MeasureError{kiln::db::ErrorKind::kRunTimeout, "timed out"};
      else
        r.outcome = std::vector<double>{latency(rng), latency(rng), latency(rng)};
      chunk.push_back(std::move(r));
    }
    db.commit(chunk);
  }
  double s = seconds_since(start);
  std::printf("fill: %ld records, %ld workloads in %.1f s (%.0f records/s)\n", o.records, o.workloads, s,
              static_cast<double>(o.records) / s);
}

static void time_lookups(kiln::db::Database &db, const Options &o, const char *label, const char *target,
                         std::mt19937_64 &rng) {
  std::vector<std::string> hashes;
  for (long w = 0; w < o.workloads; ++w) hashes.push_back(kiln::db::workload_hash_of(workload_json(w)));
  std::uniform_int_distribution<long> pick(0, o.workloads - 1);
  std::vector<double> us;
  us.reserve(o.lookups);
  long found = 0;
  for (long i = 0; i < o.lookups; ++i) {
    const std::string &hash = hashes[pick(rng)];
    auto start = Clock::now();
    found += db.best(hash, target).has_value();
    us.push_back(seconds_since(start) * 1e6);
  }
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[static_cast<size_t>(q * static_cast<double>(us.size() - 1))]; };
  std::printf("%-22s %9ld %9ld %10.1f %10.1f %10.1f\n", label, o.lookups, found, at(0.5), at(0.99), us.back());
}

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--records"))
      o.records = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workloads"))
      o.workloads = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--lookups"))
      o.lookups = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--db"))
      o.db = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (o.records <= 0 || o.workloads <= 0 || o.lookups <= 0) {
    std::fprintf(stderr, "--records, --workloads and --lookups must be positive\n");
    return 2;
  }
  bool temporary = o.db.empty();
  if (temporary)
    o.db = (std::filesystem::temp_directory_path() / ("kiln-bench-" + std::to_string(getpid()) + ".kdb")).string();
  try {
    std::mt19937_64 rng(42);
    {
      auto db = kiln::db::Database::open(o.db, kiln::db::OpenMode::kCreate);
      fill(db, o, rng);
    }
    std::printf("file: %.1f MiB\n", static_cast<double>(std::filesystem::file_size(o.db)) / (1 << 20));
    // A fresh read-only handle, as a compiler would open it.
    auto db = kiln::db::Database::open(o.db, kiln::db::OpenMode::kReadOnly);
    std::printf("%-22s %9s %9s %10s %10s %10s\n", "lookup", "calls", "found", "median us", "p99 us", "max us");
    time_lookups(db, o, "best, exact target", kTargets[0], rng);
    time_lookups(db, o, "best, fallback", kFallbackTarget, rng);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln_bench_db_lookup: %s\n", e.what());
    return 1;
  }
  if (temporary)
    for (const char *suffix : {"", "-wal", "-shm"}) std::filesystem::remove(o.db + suffix);
  return 0;
}
