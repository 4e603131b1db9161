// Opening a database, committing records and looking up the best ones.

#include "database/database.h"

#include "database/database_impl.h"
#include "database/prepared_record.h"
#include "database/schema.h"
#include "support/json_read.h"
#include "support/sha256.h"
#include "target/target.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace kiln::db {

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::~Database() = default;
Database::Database(Database &&) noexcept = default;
Database &Database::operator=(Database &&) noexcept = default;

int Database::schema_version() const { return impl_->version; }
const std::string &Database::path() const { return impl_->path; }

// kiln_vector_bits(device_model): the vector width an x86 CPU name implies (512 for
// AVX-512, 256 otherwise, 0 for a legacy `native`), so that the fallback lookup can
// rank records of the same ISA first.
static void register_vector_bits_function(sqlite::Connection &conn) {
  auto fn = [](sqlite3_context *ctx, int, sqlite3_value **argv) {
    const unsigned char *text = sqlite3_value_text(argv[0]);
    std::string_view model = text ? reinterpret_cast<const char *>(text) : "";
    sqlite3_result_int(ctx, x86_vector_bits(model));
  };
  if (sqlite3_create_function_v2(conn.get(), "kiln_vector_bits", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, fn,
                                 nullptr, nullptr, nullptr) != SQLITE_OK)
    throw DbError(std::string("cannot register an SQL function: ") + sqlite3_errmsg(conn.get()));
}

// sqlite3_open_v2 takes immutable=1 only in a URI: file:///absolute/path?query,
// with the characters a URI gives meaning to escaped.
static std::string file_uri(const std::string &path, std::string_view query) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  std::string uri = "file://";
  for (char c : ec ? path : absolute.string()) {
    if (c == '%' || c == '?' || c == '#') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[static_cast<unsigned char>(c) >> 4];
      uri += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      uri += c;
    }
  }
  return uri + "?" + std::string(query);
}

static bool file_exists(const std::string &path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// A directory, or a file that is not SQLite's, said plainly: SQLite itself reports them
// as "disk I/O error" or fails at the first PRAGMA with "unable to open database file".
// An empty file is an SQLite database not yet written.
static void require_database_file(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw DbError(path +
                  " is a directory, not a database: give a file's path (kiln creates the file where it "
                  "may create one)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // unreadable: SQLite's own message says so, with the reason
  char header[16] = {};
  in.read(header, sizeof header);
  if (in.gcount() == 0) return;
  static const char kSqliteHeader[16] = "SQLite format 3";  // and its NUL
  if (in.gcount() < 16 || std::memcmp(header, kSqliteHeader, 16) != 0)
    throw DbError("file " + path +
                  " is not a Kiln database or is corrupt: it is not an SQLite file; check the path, or restore it "
                  "from a backup or an export");
}

static sqlite::Connection connect(const std::string &path, OpenMode mode, bool immutable) {
  int flags = SQLITE_OPEN_NOMUTEX;  // one connection per thread, see the class comment
  std::string name = path;
  if (mode == OpenMode::kReadOnly) {
    flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    name = file_uri(path, immutable ? "mode=ro&immutable=1" : "mode=ro");
  } else {
    flags |= SQLITE_OPEN_READWRITE;
    if (mode == OpenMode::kCreate) flags |= SQLITE_OPEN_CREATE;
  }
  sqlite::Connection conn(name, flags);
  sqlite3_busy_timeout(conn.get(), kBusyTimeoutMs);
  register_vector_bits_function(conn);
  // SQLite's default 2 MiB page cache makes a large commit spill pages to the
  // WAL again and again (index inserts land on random pages); 64 MiB keeps a
  // 100k-record batch in memory. Pages are allocated only as used.
  conn.exec("PRAGMA cache_size = -65536");
  return conn;
}

[[noreturn]] static void throw_cannot_read(const std::string &path, const sqlite::CantOpenError &e) {
  if (file_exists(path + "-wal") && !file_exists(path + "-shm"))
    throw DbError("cannot read database " + path + ": its write-ahead log " + path + "-wal needs a " + path +
                  "-shm file, which cannot be made in its folder; open the database once read-write where its " +
                  "folder is writable, which folds the log into the file");
  throw DbError("cannot read database " + path + ": " + e.reason() + "; check that it is a readable file");
}

std::optional<FileStamp> file_stamp(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileStamp{static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino),
                   static_cast<int64_t>(info.st_size),
                   static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

void Database::Impl::reopen_if_changed() {
  if (!immutable) return;
  bool writer_open = file_exists(path + "-wal");
  std::optional<FileStamp> now = file_stamp(path);
  if (!writer_open && (!now || now == immutable_since)) return;
  // Statements belong to the old connection.
  for (auto *slot : {&insert_workload, &select_workload_id, &insert_record, &lookup_exact, &lookup_same_kind})
    slot->reset();
  try {
    conn = connect(path, OpenMode::kReadOnly, !writer_open);
  } catch (const sqlite::CantOpenError &e) {
    throw_cannot_read(path, e);
  }
  immutable = !writer_open;
  immutable_since = now;
}

// What opening for writing needs, and what to do.
static std::string needs_writing(const std::string &path) {
  return "opening it to store records (tuning, import, prune) needs write access to the file and to its folder "
         "(SQLite keeps " +
         path + "-wal and " + path + "-shm beside it): make both writable, or give another database file";
}

Database Database::open(const std::filesystem::path &file, OpenMode mode) {
  std::string path = file.string();
  // SQLite opens "" as a private temporary database: every record would be lost.
  if (path.empty()) throw DbError("the database path is empty: give a file name (--db FILE)");
  if (mode == OpenMode::kReadOnly && !file_exists(path))
    throw DbError("database " + path + " does not exist; check the path (opening for lookup never creates one)");
  if (mode == OpenMode::kReadWrite && !file_exists(path))
    throw DbError("database " + path +
                  " does not exist; check the path (this adds to an existing database: kiln tune, kiln tune-op and "
                  "kiln db import --create make new ones)");
  if (file_exists(path)) require_database_file(path);

  // Opening for lookup must not write, not even the -wal and -shm files SQLite
  // makes to read a WAL-mode file: the folder may not be writable (a database
  // shipped in a system folder). With no -wal file, no connection has the file
  // open and every transaction is in the file itself, so it is read as
  // immutable: no log, no locks. A -wal file holds committed transactions, so
  // then an ordinary read-only connection reads it (and needs its -shm).
  std::optional<FileStamp> stamp = file_stamp(path);
  bool immutable = mode == OpenMode::kReadOnly && !file_exists(path + "-wal");
  std::unique_ptr<Impl> impl;
  int version = 0;
  try {
    impl = std::make_unique<Impl>(path, connect(path, mode, immutable));
    impl->immutable = immutable;
    impl->immutable_since = stamp;
    // The version is checked before anything is written, so that a file we do
    // not understand (corrupt, foreign, newer) is left exactly as it was.
    version = with_lock_retry(path, [&] { return read_schema_version(impl->conn, path); });
  } catch (const sqlite::CantOpenError &e) {
    if (mode == OpenMode::kReadOnly) throw_cannot_read(path, e);
    throw DbError("cannot open database " + path + " to write to it: " + e.reason() + "; " + needs_writing(path));
  } catch (const sqlite::ReadOnlyError &) {
    if (mode == OpenMode::kReadOnly) throw;
    throw DbError("database " + path + " is read-only here; " + needs_writing(path));
  }
  sqlite::Connection &conn = impl->conn;
  // SQLite opens a file it may not write read-only without a word, and the first
  // commit would fail: for tuning, after its first round of measurements.
  if (mode != OpenMode::kReadOnly && sqlite3_db_readonly(conn.get(), "main") == 1)
    throw DbError("database " + path + " is read-only here; " + needs_writing(path));
  if (mode == OpenMode::kReadOnly) {
    if (version == 0) throw DbError("database " + path + " is empty; nothing to read");
    if (version < kSchemaVersion)
      throw DbError("database " + path + " has schema version " + std::to_string(version) +
                    ", older than this Kiln's " + std::to_string(kSchemaVersion) +
                    "; open it read-write once to upgrade it");
  } else {
    // WAL lets readers proceed while one writer commits. synchronous=NORMAL
    // keeps every committed transaction across a process crash; only a power
    // loss may drop the last few, and never corrupts the file.
    with_lock_retry(path, [&] { conn.exec("PRAGMA journal_mode = WAL"); });
    conn.exec("PRAGMA synchronous = NORMAL");
    if (version < kSchemaVersion) {
      impl->write_transaction([&] {
        // Re-read under the write lock: another process may have migrated.
        int current = read_schema_version(conn, path);
        if (current < kSchemaVersion) migrate(conn, current);
      });
    }
    version = kSchemaVersion;
  }
  conn.exec("PRAGMA foreign_keys = ON");
  impl->version = version;
  return Database(std::move(impl));
}

CommitResult Database::Impl::insert_all(const std::vector<PreparedRecord> &records) {
  sqlite::Statement &add_workload =
      statement(insert_workload,
                "INSERT INTO workloads (key_hash, canonical_json, op_summary, shapes) VALUES (?1, ?2, ?3, ?4) "
                "ON CONFLICT (key_hash) DO NOTHING");
  sqlite::Statement &find_workload = statement(select_workload_id, "SELECT id FROM workloads WHERE key_hash = ?1");
  sqlite::Statement &add_record = statement(
      insert_record,
      "INSERT INTO records (workload_id, target, device_kind, device_model, trace_json, trace_hash, latencies_json, "
      "mean_latency, error_kind, error_message, metadata_json, kiln_version, created_at_ms, confirmed_latency, "
      "sketch_instructions, packed_inputs_json) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) "
      "ON CONFLICT (workload_id, target, trace_hash) DO NOTHING");
  sqlite::Statement &confirm =
      statement(confirm_record,
                "UPDATE records SET confirmed_latency = ?4, metadata_json = CASE WHEN json_valid(metadata_json) "
                "THEN json_remove(metadata_json, '$.disputed') ELSE metadata_json END "
                "WHERE workload_id = ?1 AND target = ?2 AND trace_hash = ?3 AND mean_latency IS NOT NULL");

  CommitResult result;
  std::unordered_map<std::string, int64_t> workload_ids;
  for (const PreparedRecord &p : records) {
    auto cached = workload_ids.find(p.workload.key_hash);
    int64_t workload_id = 0;
    if (cached != workload_ids.end()) {
      workload_id = cached->second;
    } else {
      {
        sqlite::ResetOnExit guard(add_workload);
        add_workload.bind(1, p.workload.key_hash).bind(2, p.workload.canonical_json);
        add_workload.bind(3, p.workload.op_summary).bind(4, p.workload.shapes);
        add_workload.step();
      }
      sqlite::ResetOnExit guard(find_workload);
      find_workload.bind(1, p.workload.key_hash);
      if (!find_workload.step()) throw DbError("workload " + p.workload.key_hash + " vanished while committing");
      workload_id = find_workload.column_int(0);
      workload_ids.emplace(p.workload.key_hash, workload_id);
    }

    sqlite::ResetOnExit guard(add_record);
    add_record.bind(1, workload_id).bind(2, p.target).bind(3, p.device_kind).bind(4, p.device_model);
    add_record.bind(5, p.trace_json).bind(6, p.trace_hash);
    if (p.ok) {
      add_record.bind(7, p.latencies_json).bind(8, p.mean_latency).bind_null(9).bind_null(10);
    } else {
      add_record.bind_null(7).bind_null(8).bind(9, p.error_kind).bind(10, p.error_message);
    }
    add_record.bind(11, p.metadata_json).bind(12, p.kiln_version).bind(13, p.created_at_ms);
    if (p.confirmed_latency)
      add_record.bind(14, *p.confirmed_latency);
    else
      add_record.bind_null(14);
    if (p.sketch_instructions)
      add_record.bind(15, *p.sketch_instructions);
    else
      add_record.bind_null(15);
    if (p.packed_inputs_json)
      add_record.bind(16, *p.packed_inputs_json);
    else
      add_record.bind_null(16);
    add_record.step();
    if (conn.changes() == 1) {
      ++result.inserted;
      continue;
    }
    ++result.duplicates;
    if (!p.confirmed_latency) continue;
    sqlite::ResetOnExit confirm_guard(confirm);
    confirm.bind(1, workload_id).bind(2, p.target).bind(3, p.trace_hash).bind(4, *p.confirmed_latency);
    confirm.step();
    if (conn.changes() == 1) ++result.confirmed;
  }
  return result;
}

// Validates everything before the write lock is taken: a bad record fails the batch
// without making other writers wait.
static std::vector<PreparedRecord> prepare_all(const std::vector<Record> &records, const char *what) {
  std::vector<PreparedRecord> prepared;
  prepared.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    try {
      prepared.push_back(prepare_record(records[i], NativeCpu::kResolve));
    } catch (const DbError &e) {
      throw DbError(std::string(what) + " " + std::to_string(i) + " of " + std::to_string(records.size()) +
                    " not committed (nothing was): " + e.what());
    }
  }
  return prepared;
}

CommitResult Database::commit(const std::vector<Record> &records) {
  std::vector<PreparedRecord> prepared = prepare_all(records, "record");
  CommitResult result;
  impl_->write_transaction([&] { result = impl_->insert_all(prepared); });
  return result;
}

CommitResult Database::commit_confirmation(const std::vector<Record> &confirmed) {
  std::vector<PreparedRecord> prepared = prepare_all(confirmed, "confirmation");
  for (const PreparedRecord &p : prepared) {
    if (!p.confirmed_latency) throw DbInvalidArgument("a confirmation needs every record's confirmed latency");
    if (p.workload.key_hash != prepared.front().workload.key_hash || p.target != prepared.front().target)
      throw DbInvalidArgument("a confirmation is of one workload on one target");
  }
  CommitResult result;
  if (prepared.empty()) return result;
  impl_->write_transaction([&] {
    sqlite::Statement clear(impl_->conn.get(),
                            "UPDATE records SET confirmed_latency = NULL WHERE target = ?2 AND workload_id = "
                            "(SELECT id FROM workloads WHERE key_hash = ?1)");
    clear.bind(1, prepared.front().workload.key_hash).bind(2, prepared.front().target);
    clear.step();
    result = impl_->insert_all(prepared);
  });
  return result;
}

bool Database::mark_disputed(std::string_view workload_hash, std::string_view target_text,
                             const std::string &trace_json, const std::string &why) {
  if (why.empty()) throw DbInvalidArgument("a dispute needs its reason");
  std::string target, trace_hash;
  try {
    target = Target::parse(target_text).str();
    trace_hash = support::sha256_hex(kiln::support::parse_json(trace_json).dump());
  } catch (const std::exception &e) {
    throw DbInvalidArgument(std::string("cannot mark a record disputed: ") + e.what());
  }
  int64_t changed = 0;
  impl_->write_transaction([&] {
    sqlite::Statement mark(
        impl_->conn.get(),
        "UPDATE records SET confirmed_latency = NULL, metadata_json = json_set(metadata_json, "
        "'$.disputed', ?4) WHERE workload_id = (SELECT id FROM workloads WHERE key_hash = ?1) AND "
        "target = ?2 AND trace_hash = ?3 AND mean_latency IS NOT NULL AND json_valid(metadata_json)");
    mark.bind(1, std::string(workload_hash)).bind(2, target).bind(3, trace_hash).bind(4, why);
    mark.step();
    changed = impl_->conn.changes();
  });
  return changed > 0;
}

std::vector<Record> Database::disputed_records(std::string_view workload_hash, std::string_view target_text) {
  std::string target;
  try {
    target = Target::parse(target_text).str();
  } catch (const std::invalid_argument &e) {
    throw DbInvalidArgument(std::string("bad target: ") + e.what());
  }
  impl_->reopen_if_changed();
  return with_lock_retry(impl_->path, [&] {
    sqlite::Statement s(impl_->conn.get(), "SELECT " + std::string(kRecordColumns) +
                                               " FROM records r JOIN workloads w ON w.id = r.workload_id "
                                               "WHERE w.key_hash = ?1 AND r.target = ?2 AND r.mean_latency IS NOT "
                                               "NULL AND " +
                                               std::string(kUsableRecord) + " AND NOT " +
                                               std::string(kUndisputedRecord) + " ORDER BY r.mean_latency, r.id");
    s.bind(1, std::string(workload_hash)).bind(2, target);
    std::vector<Record> out;
    while (s.step()) out.push_back(read_record(s));
    return out;
  });
}

Record read_record(const sqlite::Statement &row) {
  Record r;
  r.id = row.column_int(0);
  r.workload = Workload{row.column_text(1), row.column_text(2), row.column_text(3), row.column_text(4)};
  r.target = row.column_text(5);
  r.trace_json = row.column_text(6);
  if (!row.is_null(7)) {
    std::vector<double> latencies;
    nlohmann::json list = kiln::support::parse_json_or_discarded(row.column_text(7));
    bool usable = list.is_array() && !list.empty();
    for (const auto &latency : list) {
      usable = usable && latency.is_number() && latency.get<double>() > 0 && std::isfinite(latency.get<double>());
      if (usable) latencies.push_back(latency.get<double>());
    }
    if (!usable) {
      throw DbError("record " + std::to_string(r.id) +
                    " has latencies that are not a list of positive numbers (written by another tool?): " +
                    row.column_text(7).substr(0, 200) + "; `kiln db prune` removes such records");
    }
    r.outcome = std::move(latencies);
  } else {
    std::string kind = row.column_text(8);
    std::optional<ErrorKind> parsed = error_kind_from_string(kind);
    if (!parsed || *parsed == ErrorKind::kNone)
      throw DbError("record " + std::to_string(r.id) + " has unknown error kind '" + kind + "'");
    r.outcome = MeasureError{*parsed, row.column_text(9)};
  }
  try {
    r.metadata = RecordMetadata::from_json(kiln::support::parse_json(row.column_text(10)));
    if (!row.is_null(14)) r.metadata.sketch_instructions = row.column_int(14);
    if (!row.is_null(15)) {
      r.metadata.packed_inputs = kiln::support::parse_json(row.column_text(15));
      if (!r.metadata.packed_inputs.is_array()) throw DbError("its packed inputs are not a JSON array");
    }
  } catch (const nlohmann::json::exception &e) {
    throw DbError("record " + std::to_string(r.id) + " has damaged metadata: " + e.what());
  } catch (const DbError &e) {
    throw DbError("record " + std::to_string(r.id) + ": " + e.what());
  }
  r.kiln_version = row.column_text(11);
  r.created_at_ms = row.column_int(12);
  if (!row.is_null(13)) r.confirmed_latency = row.column_double(13);
  return r;
}

static void read_rows(sqlite::Statement &s, size_t limit, std::vector<Record> &out) {
  while (out.size() < limit && s.step()) out.push_back(read_record(s));
}

std::vector<Record> Database::top_k(std::string_view workload_hash, std::string_view target_text, size_t k,
                                    TargetMatch match, Ranking ranking) {
  Target target;
  try {
    target = Target::parse(target_text);
  } catch (const std::invalid_argument &e) {
    throw DbInvalidArgument(std::string("bad target: ") + e.what());
  }
  std::string canonical = target.str();
  std::vector<Record> out;
  if (k == 0) return out;
  int64_t limit = static_cast<int64_t>(std::min<size_t>(k, INT64_MAX));
  impl_->reopen_if_changed();
  return with_lock_retry(impl_->path, [&] {
    out.clear();
    // Served by index records_rank_by_target (records_best_by_target for kMeasured):
    // one seek, rows already in order.
    const std::string exact_sql = "SELECT " + std::string(kRecordColumns) +
                                  " FROM records r JOIN workloads w ON w.id = r.workload_id "
                                  "WHERE w.key_hash = ?1 AND r.target = ?2 AND r.mean_latency IS NOT NULL AND " +
                                  std::string(kUsableRecord) + " AND " + std::string(kUndisputedRecord) + " ORDER BY ";
    sqlite::Statement &exact =
        ranking == Ranking::kMeasured
            ? impl_->statement(impl_->lookup_exact_measured, exact_sql + "r.mean_latency, r.id LIMIT ?3")
            : impl_->statement(impl_->lookup_exact, exact_sql + std::string(kRankOrder) + ", r.id LIMIT ?3");
    {
      sqlite::ResetOnExit guard(exact);
      exact.bind(1, workload_hash).bind(2, canonical).bind(3, limit);
      read_rows(exact, k, out);
    }
    if (out.size() == k || match == TargetMatch::kExactOnly) return out;
    // Fallback tiers: same model first, then models of the same vector width (an
    // AVX-512 schedule for an AVX-512 CPU), then the rest of the device kind.
    sqlite::Statement &same_kind =
        impl_->statement(impl_->lookup_same_kind,
                         "SELECT " + std::string(kRecordColumns) +
                             " FROM records r JOIN workloads w ON w.id = r.workload_id "
                             "WHERE w.key_hash = ?1 AND r.device_kind = ?2 AND r.target <> ?3 "
                             "AND r.mean_latency IS NOT NULL AND " +
                             std::string(kUsableRecord) + " AND " + std::string(kUndisputedRecord) +
                             " ORDER BY r.device_model = ?4 DESC, kiln_vector_bits(r.device_model) = ?6 DESC, " +
                             std::string(kRankOrder) + ", r.id LIMIT ?5");
    sqlite::ResetOnExit guard(same_kind);
    same_kind.bind(1, workload_hash).bind(2, target.device_kind()).bind(3, canonical);
    same_kind.bind(4, target.device_model()).bind(5, limit - static_cast<int64_t>(out.size()));
    same_kind.bind(6, static_cast<int64_t>(target.is_x86() ? x86_vector_bits(target.mcpu) : 0));
    read_rows(same_kind, k, out);
    return out;
  });
}

std::optional<Record> Database::best(std::string_view workload_hash, std::string_view target, TargetMatch match) {
  std::vector<Record> one = top_k(workload_hash, target, 1, match);
  if (one.empty()) return std::nullopt;
  return std::move(one.front());
}

std::vector<Record> Database::records_of(std::string_view workload_hash, std::vector<std::string> *passed_over) {
  impl_->reopen_if_changed();
  return with_lock_retry(impl_->path, [&] {
    sqlite::Statement s(impl_->conn.get(), "SELECT " + std::string(kRecordColumns) +
                                               " FROM records r JOIN workloads w ON w.id = r.workload_id "
                                               "WHERE w.key_hash = ?1 ORDER BY r.id");
    s.bind(1, workload_hash);
    std::vector<Record> out;
    if (passed_over) passed_over->clear();
    while (s.step()) {
      try {
        out.push_back(read_record(s));
      } catch (const DbError &e) {
        if (!passed_over) throw;
        passed_over->push_back(e.what());
      }
    }
    return out;
  });
}

std::vector<std::string> Database::distinct_pipelines(std::string_view target) {
  std::string canonical = canonical_target(target);
  impl_->reopen_if_changed();
  return with_lock_retry(impl_->path, [&] {
    sqlite::Statement s(impl_->conn.get(),
                        "SELECT DISTINCT json_extract(metadata_json, '$.pipeline') FROM records "
                        "WHERE target = ?1 AND json_valid(metadata_json) "
                        "AND json_type(metadata_json, '$.pipeline') = 'object' ORDER BY 1");
    s.bind(1, canonical);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.column_text(0));
    return out;
  });
}

}  // namespace kiln::db
