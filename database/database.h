// The tuning database: an SQLite file of workloads and measurement records,
// written by tuning jobs (several at once) and read by compilers looking up
// the best schedule for a workload on a target.

#pragma once

#include "database/error.h"
#include "database/record.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::db {

enum class OpenMode {
  kReadOnly,   ///< the file must exist and be at the current schema version; writes
               ///< nothing, not even -wal and -shm files (see README "Tuning database")
  kReadWrite,  ///< the file must exist; an older schema is migrated
  kCreate,     ///< like kReadWrite, creating an empty database if missing
};

/// Which records a lookup may return when the exact target has none.
enum class TargetMatch {
  /// Only records measured on the identical (canonical) target string.
  kExactOnly,
  /// Exact target first; then the same device model with other flags (e.g.
  /// another -num-cores); then other models of the same device kind (e.g. a
  /// skylake record for a cascadelake lookup, sm_80 for sm_90). A schedule
  /// from a sibling device is a far better start than none, but its latency
  /// was measured elsewhere: check Record::target to see what was returned.
  kAllowSameDeviceKind,
};

/// How lookups order successful records.
enum class Ranking {
  kConfirmedFirst,  ///< confirmed records by confirmed latency, then the rest by mean
  kMeasured,        ///< by the mean of the record's own measurement alone
};

struct CommitResult {
  size_t inserted = 0;
  size_t duplicates = 0;  ///< already stored (same workload, target and trace); ignored
  size_t confirmed = 0;   ///< of the duplicates, how many had their confirmed latency set
};

struct TargetStats {
  std::string target;
  int64_t records = 0;
  int64_t successful = 0;
};

struct Stats {
  int schema_version = 0;
  int64_t workloads = 0;
  int64_t records = 0;
  int64_t successful = 0;
  int64_t errors = 0;
  /// Successful records whose latencies another tool damaged; lookups pass them over.
  int64_t unusable = 0;
  /// Successful records whose figure another runner of their key disputed
  /// (RecordMetadata::disputed): lookups pass them over until they are re-timed.
  int64_t disputed = 0;
  std::vector<std::pair<std::string, int64_t>> errors_by_kind;  ///< sorted by kind
  std::vector<TargetStats> targets;                             ///< sorted by target
};

/// An open database file. Not thread-safe: open one per thread (or process);
/// SQLite's WAL mode lets any number of them read and write concurrently.
/// Every method throws DbError on failure.
class Database {
 public:
  static Database open(const std::filesystem::path &path, OpenMode mode);
  ~Database();
  Database(Database &&) noexcept;
  Database &operator=(Database &&) noexcept;

  /// Stores `records` in one transaction: all or none. A record already
  /// stored under the same (workload, target, trace) is counted as a
  /// duplicate and not stored again: a record is a fact about a program on a
  /// device, and re-measuring it adds no new program to the search. Only its
  /// confirmed latency is updated, when the new record carries one.
  CommitResult commit(const std::vector<Record> &records);

  /// Stores one side-by-side re-timing of a workload's top programs on one target:
  /// every record carries its confirmed latency (the median of the re-timings), and
  /// in the same transaction every other record of that workload and target loses
  /// its confirmation. Confirmed latencies then always come from one batch, timed
  /// together: figures from different batches would compare the host's speed at two
  /// moments as much as the programs. Records not yet stored are stored.
  CommitResult commit_confirmation(const std::vector<Record> &confirmed);

  /// Marks the stored record of `workload_hash`, `target` and `trace_json` disputed
  /// (RecordMetadata::disputed = `why`, its confirmation dropped): lookups pass it over
  /// until a confirmation re-times it. Returns false when no such successful record is
  /// stored.
  bool mark_disputed(std::string_view workload_hash, std::string_view target, const std::string &trace_json,
                     const std::string &why);
  /// The disputed records of a workload on a target (exact), fastest measured first: what
  /// a confirmation re-times besides the top programs.
  std::vector<Record> disputed_records(std::string_view workload_hash, std::string_view target);

  /// The fastest successful record: the lowest confirmed latency when any record
  /// of the tier is confirmed, else the lowest mean latency (ties: oldest).
  /// Error records are never returned. `target` may be in any flag order.
  std::optional<Record> best(std::string_view workload_hash, std::string_view target,
                             TargetMatch match = TargetMatch::kAllowSameDeviceKind);
  /// Up to k successful records, fastest first (confirmed ones first, by confirmed
  /// latency; then the rest by mean latency; kMeasured: by mean latency alone),
  /// exact target first, then the fallback tiers of `match` in order.
  std::vector<Record> top_k(std::string_view workload_hash, std::string_view target, size_t k,
                            TargetMatch match = TargetMatch::kAllowSameDeviceKind,
                            Ranking ranking = Ranking::kConfirmedFirst);
  /// The pipeline options (RecordMetadata::pipeline, as JSON text) of the model jobs
  /// that stored records for `target`, each once: a compile prepared another way can
  /// say which options the database was tuned with.
  std::vector<std::string> distinct_pipelines(std::string_view target);

  /// Every record of a workload, errors included, oldest first. A record that cannot
  /// be read (damaged by another tool) throws DbError naming it, or, with
  /// `passed_over`, is left out and its message added there.
  std::vector<Record> records_of(std::string_view workload_hash, std::vector<std::string> *passed_over = nullptr);

  Stats stats();

  /// Writes every record as one JSON line, oldest first. Returns the count. A record
  /// that cannot be read throws DbError naming it, or, with `passed_over`, is left out
  /// and its message added there.
  size_t export_jsonl(std::ostream &out, std::vector<std::string> *passed_over = nullptr);
  /// Reads JSON lines (blank lines are skipped) and commits them in one
  /// transaction. Any malformed line aborts the import before anything is
  /// written, with an error naming its line number. `check`, when given, is called
  /// with every record before anything is written; an exception it throws refuses the
  /// import the same way (kiln db import replays each trace on its workload there).
  CommitResult import_jsonl(std::istream &in, const std::function<void(const Record &)> &check = {});

  /// Keeps the `keep_per_target` fastest successful records of every
  /// (workload, target) and deletes the rest, error records and records with
  /// damaged latencies (Stats::unusable) included, and workloads left without records. Returns the number of records
  /// deleted. For shipping a compact database; a tuning job's own file keeps its errors, which stop the search from
  /// measuring failing programs again.
  size_t prune(size_t keep_per_target);

  /// Moves the records stored under target `from` (the exact stored string after
  /// canonicalization, `-mcpu=native` kept as written) to target `to` (a user's
  /// target: `native` is this host). For records an older Kiln stored under
  /// `-mcpu=native`, by someone who knows which machine measured them. A record
  /// whose trace `to` already holds stays under `from`. Returns {moved, left}.
  std::pair<size_t, size_t> retarget(std::string_view from, std::string_view to);

  int schema_version() const;
  const std::string &path() const;

 private:
  struct Impl;
  explicit Database(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::db
