// A version-1 file, written with the frozen v1 SQL, is migrated on open.

#include "database/schema.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

std::string v1_sql() { return read_bytes(std::filesystem::path(KILN_SOURCE_DIR) / "database/schema/v1.sql"); }

// Writes a version-1 database as Kiln 0.1.0 did: two workloads, records on
// two targets spelled as users typed them (v1 did not canonicalize), one
// error record, one target string that today's parser rejects.
void write_v1_database(const std::filesystem::path &path) {
  std::string w1 = workload(1).key_hash, w2 = workload(2).key_hash;
  sqlite_exec(path, v1_sql());
  sqlite_exec(path, "INSERT INTO workloads (id, key_hash, canonical_json) VALUES (1, '" + w1 + "', '" +
                        workload_json(1) + "'), (2, '" + w2 + "', '" + workload_json(2) + "');");
  auto row = [](int workload_id, const std::string &target, const std::string &trace, const std::string &latency) {
    std::string ok = latency.empty() ? "NULL, NULL, 'build_error', 'llc failed'"
                                     : "'[" + latency + "]', " + latency + ", NULL, NULL";
    return "INSERT INTO records (workload_id, target, trace_json, trace_hash, latencies_json, mean_latency, "
           "error_kind, error_message, kiln_version, created_at_ms) VALUES (" +
           std::to_string(workload_id) + ", '" + target + "', '" + trace + "', '" + support::sha256_hex(trace) + "', " +
           ok + ", '0.1.0', 1690000000000);";
  };
  const std::string skylake = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=4";
  sqlite_exec(path, row(1, skylake, R"({"v":1})", "0.002") + row(1, kSkylake, R"({"v":2})", "0.001") +
                        row(1, skylake, R"({"v":3})", "") + row(1, kCascadelake, R"({"v":4})", "0.003") +
                        row(2, "llvm -mfloat-abi=soft", R"({"v":5})", "0.004"));
}

TEST(Migration, FrozenV1ScriptMatchesTheOneTheLibraryReplays) { EXPECT_EQ(v1_sql(), std::string(schema_v1_sql())); }

TEST(Migration, ReadOnlyOpenOfV1FileAsksForAnUpgrade) {
  TempDir dir;
  write_v1_database(dir / "old.kdb");
  std::string error = db_error_of([&] { Database::open(dir / "old.kdb", OpenMode::kReadOnly); });
  EXPECT_NE(error.find("has schema version 1, older than this Kiln's " + std::to_string(kSchemaVersion) +
                       "; open it read-write once"),
            std::string::npos)
      << error;
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT version FROM schema_version"), "1");
}

TEST(Migration, ReadWriteOpenMigratesV1ToTheCurrentVersionAndKeepsRecords) {
  TempDir dir;
  write_v1_database(dir / "old.kdb");
  {
    auto db = Database::open(dir / "old.kdb", OpenMode::kReadWrite);
    EXPECT_EQ(db.schema_version(), kSchemaVersion);
    EXPECT_EQ(db.stats().records, 5);

    auto best = db.best(workload(1).key_hash, kSkylake, TargetMatch::kExactOnly);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->trace_json, R"({"v":2})");
    EXPECT_EQ(best->kiln_version, "0.1.0");
    // Targets were canonicalized, so all three skylake records are one target.
    EXPECT_EQ(db.top_k(workload(1).key_hash, kSkylake, 5, TargetMatch::kExactOnly).size(), 2u);
    EXPECT_EQ(db.stats().targets.size(), 3u);
    // device_kind was filled from the target string, so v1 records now serve
    // fallback lookups.
    auto fallback = db.best(workload(1).key_hash, "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=4");
    ASSERT_TRUE(fallback);
    EXPECT_EQ(fallback->trace_json, R"({"v":2})");
    // The unparsable v1 target stays reachable by its exact string only.
    auto raw = db.records_of(workload(2).key_hash);
    ASSERT_EQ(raw.size(), 1u);
    EXPECT_EQ(raw[0].target, "llvm -mfloat-abi=soft");

    // The migrated file accepts new records.
    EXPECT_EQ(db.commit({ok_record(2, kSkylake, R"({"v":6})", {1e-3})}).inserted, 1u);
  }
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  // v3: no record was confirmed before; the ranking index exists.
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT count(confirmed_latency) FROM records"), "0");
  EXPECT_EQ(
      sqlite_query_text(dir / "old.kdb", "SELECT count(*) FROM sqlite_master WHERE name = 'records_rank_by_target'"),
      "1");
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT device_kind || '/' || device_model FROM records WHERE id = 4"),
            "cpu-x86_64/cascadelake");
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT device_kind FROM records WHERE id = 5"), "");
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb",
                              "SELECT count(*) FROM sqlite_master WHERE name = 'records_best_by_device_kind'"),
            "1");
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "PRAGMA integrity_check"), "ok");
  // Reopening a migrated file is a no-op.
  EXPECT_EQ(Database::open(dir / "old.kdb", OpenMode::kReadOnly).schema_version(), kSchemaVersion);
}

// Version 4: the metadata fields code reads back move from metadata_json into their
// columns; a value of another type, and keys Kiln does not know, stay in the JSON.
TEST(Migration, MetadataFieldsMoveIntoTheirColumns) {
  TempDir dir;
  write_v1_database(dir / "old.kdb");
  sqlite_exec(
      dir / "old.kdb",
      R"(UPDATE records SET metadata_json = '{"sketch_instructions":7,"packed_inputs":[{"input":1,"shape":[4,8]}],)"
      R"("flush_args":true,"runner":"board-3"}' WHERE id = 2;)"
      R"(UPDATE records SET metadata_json = '{"sketch_instructions":"seven"}' WHERE id = 4;)");
  {
    auto db = Database::open(dir / "old.kdb", OpenMode::kReadWrite);
    auto best = db.best(workload(1).key_hash, kSkylake, TargetMatch::kExactOnly);
    ASSERT_TRUE(best);
    EXPECT_EQ(best->id, 2);
    EXPECT_EQ(best->metadata.sketch_instructions, 7);
    EXPECT_EQ(best->metadata.packed_inputs.dump(), R"([{"input":1,"shape":[4,8]}])");
    EXPECT_TRUE(best->metadata.flush_args);
    EXPECT_EQ(best->metadata.other.dump(), R"({"runner":"board-3"})");
    // The record whose field had the wrong type is reported when read, naming it.
    EXPECT_NE(db_error_of([&] {
                db.best(workload(1).key_hash, kCascadelake, TargetMatch::kExactOnly);
              }).find("record 4: metadata 'sketch_instructions' must be a non-negative integer"),
              std::string::npos);
  }
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT sketch_instructions FROM records WHERE id = 2"), "7");
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT metadata_json FROM records WHERE id = 2"),
            R"({"flush_args":true,"runner":"board-3"})");
  EXPECT_EQ(sqlite_query_text(dir / "old.kdb", "SELECT count(sketch_instructions) FROM records"), "1");
  // Round trip of a new record: the column fields come back as they went in.
  auto db = Database::open(dir / "old.kdb", OpenMode::kReadWrite);
  Record r = ok_record(2, kSkylake, R"({"v":8})", {1e-4});
  r.metadata.sketch_instructions = 3;
  r.metadata.packed_inputs = nlohmann::json::parse(R"([{"input":1,"shape":[2]}])");
  r.metadata.pipeline = {{"layout", "NCHW"}, {"layout_rewrite", true}, {"winograd", false}};
  db.commit({r});
  auto back = db.best(workload(2).key_hash, kSkylake, TargetMatch::kExactOnly);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->metadata, r.metadata);
  EXPECT_EQ(db.distinct_pipelines(kSkylake),
            std::vector<std::string>{R"({"layout":"NCHW","layout_rewrite":true,"winograd":false})"});
  EXPECT_TRUE(db.distinct_pipelines(kCascadelake).empty());
}

TEST(Migration, NewFileIsAtCurrentVersionInWalMode) {
  TempDir dir;
  { Database::open(dir / "new.kdb", OpenMode::kCreate); }
  EXPECT_EQ(sqlite_query_text(dir / "new.kdb", "SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(sqlite_query_text(dir / "new.kdb", "PRAGMA journal_mode"), "wal");
}

}  // namespace
}  // namespace kiln::db
