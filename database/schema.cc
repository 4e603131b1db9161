// Schema versions and migrations. A new file is created by replaying every
// migration from version 1, so the upgrade path is exercised on every run,
// not only when someone opens an old file.

#include "database/schema.h"

#include "database/sqlite.h"
#include "target/target.h"

#include <stdexcept>
#include <vector>

namespace kiln::db {

static constexpr std::string_view kSchemaV1 = R"sql(-- Kiln tuning database, schema version 1 (Kiln 0.1.0), frozen.
-- Kept verbatim so that tests can create a version-1 file and check that
-- opening it read-write migrates it. Never edit: add a migration instead.
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1);
CREATE TABLE workloads (
  id INTEGER PRIMARY KEY,
  key_hash TEXT NOT NULL UNIQUE,
  canonical_json TEXT NOT NULL,
  op_summary TEXT NOT NULL DEFAULT '',
  shapes TEXT NOT NULL DEFAULT ''
);
CREATE TABLE records (
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads (id) ON DELETE CASCADE,
  target TEXT NOT NULL,
  trace_json TEXT NOT NULL,
  trace_hash TEXT NOT NULL,
  latencies_json TEXT,
  mean_latency REAL,
  error_kind TEXT,
  error_message TEXT,
  metadata_json TEXT NOT NULL DEFAULT '{}',
  kiln_version TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  UNIQUE (workload_id, target, trace_hash),
  CHECK ((mean_latency IS NULL) <> (error_kind IS NULL))
);
CREATE INDEX records_best_by_target ON records (workload_id, target, mean_latency)
  WHERE mean_latency IS NOT NULL;
)sql";

std::string_view schema_v1_sql() { return kSchemaV1; }

// Version 2 adds the device family and model of each record's target, so that
// a lookup for an unseen CPU model can fall back to records of the same family,
// and stores targets in canonical form, so that flag order no longer matters.
static void migrate_v1_to_v2(sqlite::Connection &conn) {
  conn.exec(R"sql(
    ALTER TABLE records ADD COLUMN device_kind TEXT NOT NULL DEFAULT '';
    ALTER TABLE records ADD COLUMN device_model TEXT NOT NULL DEFAULT '';
  )sql");
  // Derived in C++ because only Target knows how to read a target string.
  // A target that no longer parses keeps '' and is then reachable by exact
  // target string only.
  // Read all targets first: updating rows a SELECT is still walking may
  // make SQLite visit them again.
  std::vector<std::string> targets;
  {
    sqlite::Statement select(conn.get(), "SELECT DISTINCT target FROM records");
    while (select.step()) targets.push_back(select.column_text(0));
  }
  sqlite::Statement update(conn.get(), "UPDATE records SET device_kind = ?1, device_model = ?2 WHERE target = ?3");
  // OR IGNORE: a row whose canonical target would duplicate another record of
  // the same trace keeps its old spelling; it still serves fallback lookups.
  sqlite::Statement canonicalize(conn.get(), "UPDATE OR IGNORE records SET target = ?1 WHERE target = ?2");
  for (const std::string &target : targets) {
    Target parsed;
    try {
      parsed = Target::parse(target, NativeCpu::kKeepAsStored);
    } catch (const std::invalid_argument &) {
      continue;
    }
    {
      sqlite::ResetOnExit guard(update);
      update.bind(1, parsed.device_kind()).bind(2, parsed.device_model()).bind(3, target);
      update.step();
    }
    sqlite::ResetOnExit guard(canonicalize);
    canonicalize.bind(1, parsed.str()).bind(2, target);
    canonicalize.step();
  }
  conn.exec(R"sql(
    CREATE INDEX records_best_by_device_kind ON records (workload_id, device_kind, mean_latency)
      WHERE mean_latency IS NOT NULL;
    UPDATE schema_version SET version = 2;
  )sql");
}

// Version 3 adds each record's confirmed latency (the median of re-timings beside the
// other top programs at the end of a tuning run) and ranks confirmed records first.
static void migrate_v2_to_v3(sqlite::Connection &conn) {
  conn.exec(R"sql(
    ALTER TABLE records ADD COLUMN confirmed_latency REAL;
    CREATE INDEX records_rank_by_target ON records
      (workload_id, target, (confirmed_latency IS NULL), coalesce(confirmed_latency, mean_latency))
      WHERE mean_latency IS NOT NULL;
    UPDATE schema_version SET version = 3;
  )sql");
}

// Version 4 moves the two metadata fields that code reads back into columns
// (RecordMetadata): the sketch length the tuner resumes from, and the packed weights
// the C API reports. Values of other types than the field's stay in metadata_json,
// where reading the record reports them.
static void migrate_v3_to_v4(sqlite::Connection &conn) {
  conn.exec(R"sql(
    ALTER TABLE records ADD COLUMN sketch_instructions INTEGER;
    ALTER TABLE records ADD COLUMN packed_inputs_json TEXT;
    UPDATE records SET
      sketch_instructions = json_extract(metadata_json, '$.sketch_instructions'),
      metadata_json = json_remove(metadata_json, '$.sketch_instructions')
      WHERE json_valid(metadata_json) AND json_type(metadata_json, '$.sketch_instructions') = 'integer';
    UPDATE records SET
      packed_inputs_json = json_extract(metadata_json, '$.packed_inputs'),
      metadata_json = json_remove(metadata_json, '$.packed_inputs')
      WHERE json_valid(metadata_json) AND json_type(metadata_json, '$.packed_inputs') = 'array';
    UPDATE schema_version SET version = 4;
  )sql");
}

void migrate(sqlite::Connection &conn, int from) {
  if (from < 1) conn.exec(kSchemaV1);
  if (from < 2) migrate_v1_to_v2(conn);
  if (from < 3) migrate_v2_to_v3(conn);
  if (from < 4) migrate_v3_to_v4(conn);
}

static std::string not_kiln(const std::string &path, const std::string &why) {
  return "file " + path + " is not a Kiln database or is corrupt: " + why;
}

int read_schema_version(sqlite::Connection &conn, const std::string &path) {
  // sqlite::CorruptError already says "file X is not a Kiln database or is corrupt".
  int64_t tables = conn.query_int("SELECT count(*) FROM sqlite_master");
  if (tables == 0) return 0;
  if (conn.query_int("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'") == 0)
    throw DbError(not_kiln(path, "it is an SQLite file without Kiln's schema_version table"));
  if (conn.query_int("SELECT count(*) FROM schema_version") != 1)
    throw DbError(not_kiln(path, "table schema_version must hold exactly one row"));
  int64_t version = conn.query_int("SELECT version FROM schema_version");
  if (version < 1) throw DbError(not_kiln(path, "schema version " + std::to_string(version) + " is not valid"));
  if (version > kSchemaVersion)
    throw DbError("database " + path + " has schema version " + std::to_string(version) +
                  " but this Kiln understands up to " + std::to_string(kSchemaVersion) + "; upgrade Kiln");
  // Every version has these; without one, every query would fail with SQLite's own
  // "no such table".
  for (const char *table : {"workloads", "records"}) {
    if (conn.query_int(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '") + table +
                       "'") == 0)
      throw DbError(not_kiln(path, std::string("its table '") + table + "' is missing") +
                    "; restore the file from a backup, or move it aside and let Kiln create a new database there");
  }
  return static_cast<int>(version);
}

}  // namespace kiln::db
