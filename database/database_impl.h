// Database's private state and the helpers its member files share:
// lock-retry, transactions, lazily prepared statements, row reading.

#pragma once

#include "database/database.h"
#include "database/prepared_record.h"
#include "database/sqlite.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>

namespace kiln::db {

/// How long a writer waits for another writer before giving up. SQLite's own
/// busy handler waits kBusyTimeoutMs per attempt; whole transactions are
/// retried until kLockDeadline because some lock conflicts (a snapshot that
/// became stale) are reported at once, without calling the busy handler.
inline constexpr int kBusyTimeoutMs = 5000;
inline constexpr std::chrono::seconds kLockDeadline{60};

/// Runs `body` and retries it while it fails with a lock conflict.
template <class F>
auto with_lock_retry(const std::string &path, F &&body) -> decltype(body()) {
  auto deadline = std::chrono::steady_clock::now() + kLockDeadline;
  for (int attempt = 0;; ++attempt) {
    try {
      return body();
    } catch (const sqlite::BusyError &e) {
      if (std::chrono::steady_clock::now() > deadline)
        throw DbError("database " + path + " stayed locked by another process for " +
                      std::to_string(kLockDeadline.count()) + " s (" + e.what() +
                      "); check for a stuck writer, or a file on a network filesystem, where locking does not work");
      std::this_thread::sleep_for(std::chrono::milliseconds(1 << std::min(attempt, 6)));
    }
  }
}

/// What changes when a file is written or replaced.
struct FileStamp {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t modified_ns = 0;
  bool operator==(const FileStamp &) const = default;
};

/// The stamp of the file at `path`; nullopt if it cannot be read.
std::optional<FileStamp> file_stamp(const std::string &path);

struct Database::Impl {
  std::string path;
  sqlite::Connection conn;
  int version = 0;
  /// Read-only, opened with immutable=1: no locks, no log, no noticing
  /// changes. See reopen_if_changed.
  bool immutable = false;
  /// The file when the immutable connection opened it.
  std::optional<FileStamp> immutable_since;
  std::optional<sqlite::Statement> insert_workload;
  std::optional<sqlite::Statement> select_workload_id;
  std::optional<sqlite::Statement> insert_record;
  std::optional<sqlite::Statement> confirm_record;
  std::optional<sqlite::Statement> lookup_exact;
  std::optional<sqlite::Statement> lookup_exact_measured;
  std::optional<sqlite::Statement> lookup_same_kind;

  Impl(std::string p, sqlite::Connection c) : path(std::move(p)), conn(std::move(c)) {}

  sqlite::Statement &statement(std::optional<sqlite::Statement> &slot, std::string_view sql) {
    if (!slot) slot.emplace(conn.get(), sql);
    return *slot;
  }

  /// Called before every read. An immutable connection is safe only while the
  /// file stays as it was. Once a writer has it open (its -wal file appeared),
  /// the connection is replaced by an ordinary read-only one, which takes
  /// locks and reads the log; once a writer has come and gone (the file
  /// changed), it is opened afresh, so that no cached page is stale.
  void reopen_if_changed();

  /// Runs `body` in a BEGIN IMMEDIATE transaction (the write lock is taken up
  /// front, so two writers never deadlock upgrading read locks), retrying the
  /// whole transaction on lock conflicts. `body` must be safe to rerun.
  template <class F>
  void write_transaction(F &&body) {
    with_lock_retry(path, [&] {
      conn.exec("BEGIN IMMEDIATE");
      try {
        body();
        conn.exec("COMMIT");
      } catch (...) {
        try {
          conn.exec("ROLLBACK");
        } catch (const DbError &) {
          // Already rolled back by SQLite (e.g. after an I/O error).
        }
        throw;
      }
    });
  }

  /// Inserts prepared records; the caller holds a write transaction.
  CommitResult insert_all(const std::vector<PreparedRecord> &records);
};

/// The columns read_record expects, in order; tables aliased r and w.
inline constexpr std::string_view kRecordColumns =
    "r.id, w.key_hash, w.canonical_json, w.op_summary, w.shapes, r.target, r.trace_json, r.latencies_json, "
    "r.error_kind, r.error_message, r.metadata_json, r.kiln_version, r.created_at_ms, r.confirmed_latency, "
    "r.sketch_instructions, r.packed_inputs_json";

/// How lookups rank successful records (Ranking::kConfirmedFirst): confirmed ones
/// first, by confirmed latency, then the rest by mean latency. Spelled exactly as
/// index records_rank_by_target is, so that SQLite serves the order from it.
inline constexpr std::string_view kRankOrder =
    "(r.confirmed_latency IS NULL), coalesce(r.confirmed_latency, r.mean_latency)";

/// Successful records that another tool may have damaged (the columns are SQLite's,
/// typed by the writer): a latency that is text, zero or negative, a list of latencies
/// that is not a JSON array, metadata that is not a JSON object, packed inputs that are
/// not an array. Lookups pass over such records instead of ranking a "fast" text first;
/// prune removes them; `kiln db stats` counts them.
inline constexpr std::string_view kUsableRecord =
    "(typeof(r.mean_latency) IN ('real', 'integer') AND r.mean_latency > 0 "
    "AND (r.confirmed_latency IS NULL OR (typeof(r.confirmed_latency) IN ('real', 'integer') "
    "AND r.confirmed_latency > 0)) AND json_valid(r.latencies_json) AND json_type(r.latencies_json) = 'array' "
    "AND json_valid(r.metadata_json) AND json_type(r.metadata_json) = 'object' AND (r.packed_inputs_json IS NULL "
    "OR (json_valid(r.packed_inputs_json) AND json_type(r.packed_inputs_json) = 'array')))";

/// Records whose figure is not in dispute (RecordMetadata::disputed): lookups rank only
/// these. CASE, not AND: json_type must never see metadata that is not JSON.
inline constexpr std::string_view kUndisputedRecord =
    "(CASE WHEN json_valid(r.metadata_json) THEN json_type(r.metadata_json, '$.disputed') END IS NULL)";

/// Builds a Record from the current row of a statement selecting kRecordColumns.
Record read_record(const sqlite::Statement &row);

}  // namespace kiln::db
