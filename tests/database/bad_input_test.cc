// Files and inputs the database must refuse with a clear message, leaving
// the file exactly as it was.

#include "database/schema.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

std::string open_error(const std::filesystem::path &path, OpenMode mode) {
  return db_error_of([&] { Database::open(path, mode); });
}

TEST(BadInput, AMissingFileIsNotCreatedOutsideCreateMode) {
  TempDir dir;
  EXPECT_NE(open_error(dir / "none.kdb", OpenMode::kReadOnly).find("does not exist"), std::string::npos);
  EXPECT_NE(open_error(dir / "none.kdb", OpenMode::kReadWrite).find("kiln db import --create make new ones"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "none.kdb"));
}

TEST(BadInput, CorruptFileIsRefusedAndUnchanged) {
  TempDir dir;
  std::filesystem::path path = dir / "junk.kdb";
  std::string junk(8192, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 131 + 7) % 251);
  std::ofstream(path, std::ios::binary) << junk;
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite, OpenMode::kCreate}) {
    std::string error = open_error(path, mode);
    EXPECT_NE(error.find("file " + path.string() + " is not a Kiln database or is corrupt: "), std::string::npos)
        << error;
  }
  EXPECT_EQ(read_bytes(path), junk);
}

// A small text file, and a directory, in every mode: said to be what they are (SQLite
// said "unable to open database file" at its first PRAGMA, or "disk I/O error").
TEST(BadInput, TextFilesAndDirectoriesAreNamedAsSuch) {
  TempDir dir;
  std::filesystem::path text = dir / "notes.txt";
  std::ofstream(text) << "hello\n";
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite, OpenMode::kCreate}) {
    std::string error = open_error(text, mode);
    EXPECT_NE(error.find("is not a Kiln database or is corrupt: it is not an SQLite file"), std::string::npos) << error;
    std::filesystem::create_directories(dir / "folder.kdb");
    error = open_error(dir / "folder.kdb", mode);
    EXPECT_NE(error.find("is a directory, not a database"), std::string::npos) << error;
  }
  EXPECT_EQ(read_bytes(text), "hello\n");
}

TEST(BadInput, DamagedKilnFileIsReportedAsCorrupt) {
  TempDir dir;
  std::filesystem::path path = dir / "damaged.kdb";
  {
    auto db = Database::open(path, OpenMode::kCreate);
    std::vector<Record> many;
    for (int i = 0; i < 300; ++i) many.push_back(ok_record(i, kSkylake, "{\"i\":" + std::to_string(i) + "}", {1e-3}));
    db.commit(many);
  }
  // Overwrite every page after the first (the schema survives, the tables do not).
  std::string bytes = read_bytes(path);
  ASSERT_GT(bytes.size(), 8192u);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  std::string error = db_error_of([&] {
    auto db = Database::open(path, OpenMode::kReadOnly);
    db.stats();
  });
  EXPECT_NE(error.find("file " + path.string() + " is not a Kiln database or is corrupt: "), std::string::npos)
      << error;
  EXPECT_NE(error.find("malformed"), std::string::npos) << error;
}

TEST(BadInput, ForeignSqliteFileIsNotAKilnDatabase) {
  TempDir dir;
  std::filesystem::path path = dir / "other.sqlite";
  sqlite_exec(path, "CREATE TABLE customers (name TEXT);");
  std::string before = read_bytes(path);
  std::string error = open_error(path, OpenMode::kReadWrite);
  EXPECT_NE(error.find("is not a Kiln database or is corrupt: it is an SQLite file without Kiln's schema_version"),
            std::string::npos)
      << error;
  EXPECT_EQ(read_bytes(path), before);
}

// A Kiln file whose records table was dropped is refused at open, saying what is
// missing and what to do, not with SQLite's "no such table" at the first query.
TEST(BadInput, ADroppedTableIsReportedAtOpenWithWhatToDo) {
  TempDir dir;
  std::filesystem::path path = dir / "dropped.kdb";
  {
    auto db = Database::open(path, OpenMode::kCreate);
    db.commit({ok_record(1, kSkylake, trace("a1"), {1e-3})});
  }
  sqlite_exec(path, "DROP TABLE records; PRAGMA wal_checkpoint(TRUNCATE);");
  std::string before = read_bytes(path);
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite, OpenMode::kCreate}) {
    EXPECT_EQ(open_error(path, mode), "file " + path.string() +
                                          " is not a Kiln database or is corrupt: its table 'records' is missing; "
                                          "restore the file from a backup, or move it aside and let Kiln create a "
                                          "new database there");
  }
  EXPECT_EQ(read_bytes(path), before);
}

// A stored trace that is not JSON (the file edited outside Kiln) is reported with the
// record it belongs to, not as the JSON parser's bare message.
TEST(BadInput, ATraceThatIsNotJsonNamesItsRecord) {
  TempDir dir;
  std::filesystem::path path = dir / "edited.kdb";
  { Database::open(path, OpenMode::kCreate).commit({ok_record(1, kSkylake, trace("a1"), {1e-3})}); }
  sqlite_exec(path, "UPDATE records SET trace_json = '{not json';");
  auto db = Database::open(path, OpenMode::kReadOnly);
  std::string error = db_error_of([&] {
    std::ostringstream out;
    db.export_jsonl(out);
  });
  EXPECT_EQ(error.rfind("record 1 (workload matmul, key " + workload(1).key_hash.substr(0, 16) + ", target '" +
                            std::string(kSkylake) + "') has a trace that is not JSON (parse error at line 1",
                        0),
            0u)
      << error;
  EXPECT_EQ(error.find("[json.exception"), std::string::npos) << error;
  EXPECT_NE(error.find("delete the record"), std::string::npos) << error;
}

// Columns written by another tool: a latency stored as text sorted before every number
// (SQLite orders by type), a negative confirmed latency ranked first, a damaged list of
// latencies threw nlohmann's raw message. Lookups now pass such records over, stats
// count them, prune removes them, and reading one names it.
TEST(BadInput, LatenciesAnotherToolDamagedAreNeverRankedAndAreCountedAndPruned) {
  TempDir dir;
  std::filesystem::path path = dir / "edited.kdb";
  {
    Database::open(path, OpenMode::kCreate)
        .commit({ok_record(1, kSkylake, trace("a1"), {1e-3}), ok_record(1, kSkylake, trace("a2"), {2e-3}),
                 ok_record(1, kSkylake, trace("a3"), {3e-3}), ok_record(1, kSkylake, trace("a4"), {4e-3}),
                 ok_record(1, kSkylake, trace("a5"), {5e-3})});
  }
  sqlite_exec(path,
              "UPDATE records SET mean_latency = 'fast' WHERE id = 2;"
              "UPDATE records SET confirmed_latency = -5 WHERE id = 3;"
              "UPDATE records SET latencies_json = '[1,' WHERE id = 1;"
              "UPDATE records SET mean_latency = 0 WHERE id = 5;");
  auto db = Database::open(path, OpenMode::kReadWrite);
  std::vector<Record> ranked = db.top_k(workload(1).key_hash, kSkylake, 10);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].id, 4);
  EXPECT_EQ(db.best(workload(1).key_hash, kSkylake)->id, 4);
  EXPECT_EQ(db.stats().unusable, 4);

  sqlite_exec(path, "UPDATE records SET latencies_json = '[\"a\"]' WHERE id = 2;");
  std::string error = db_error_of([&] { db.records_of(workload(1).key_hash); });
  EXPECT_NE(error.find("record 1 has latencies that are not a list of positive numbers"), std::string::npos) << error;
  EXPECT_EQ(error.find("[json.exception"), std::string::npos) << error;

  EXPECT_EQ(db.prune(10), 4u);
  EXPECT_EQ(db.stats().unusable, 0);
  EXPECT_EQ(db.stats().records, 1);
}

TEST(BadInput, NewerSchemaVersionAsksForUpgradeAndLeavesFileAlone) {
  TempDir dir;
  std::filesystem::path path = dir / "future.kdb";
  { Database::open(path, OpenMode::kCreate); }
  sqlite_exec(path, "UPDATE schema_version SET version = 7; PRAGMA wal_checkpoint(TRUNCATE);");
  std::string before = read_bytes(path);
  for (OpenMode mode : {OpenMode::kReadOnly, OpenMode::kReadWrite}) {
    EXPECT_EQ(open_error(path, mode), "database " + path.string() +
                                          " has schema version 7 but this Kiln understands up to " +
                                          std::to_string(kSchemaVersion) + "; upgrade Kiln");
  }
  EXPECT_EQ(read_bytes(path), before);
}

TEST(BadInput, MalformedJsonlImportNamesTheLineAndWritesNothing) {
  TempDir dir;
  std::filesystem::path path = dir / "t.kdb";
  std::string good_lines;
  {
    auto db = Database::open(path, OpenMode::kCreate);
    db.commit({ok_record(1, kSkylake, trace("a1"), {1e-3})});
    // Three valid lines from another database to import.
    auto other = Database::open(dir / "other.kdb", OpenMode::kCreate);
    other.commit({ok_record(2, kSkylake, trace("b1"), {1e-3}), ok_record(2, kSkylake, trace("b2"), {2e-3}),
                  error_record(3, kSkylake, trace("c1"), ErrorKind::kBuildTimeout, "60 s")});
    std::ostringstream out;
    other.export_jsonl(out);
    good_lines = out.str();
  }
  std::string before = read_bytes(path);

  struct Case {
    std::string bad_line;
    std::string expected;
  };
  // A line whose fields are all valid up to "trace", which comes next.
  std::string up_to_trace = R"({"format":"kiln-record-1","workload":{"key_hash":"","canonical_json":"{}"},)"
                            R"("target":"llvm","trace":)";
  std::string good_trace = trace("t");
  std::vector<Case> cases = {
      {"{not json", "import line 3: not valid JSON"},
      {R"({"a":1e999})", "import line 3: not valid JSON"},  // a number past double's range
      {R"({"format":"kiln-record-9"})", "import line 3: unknown format \"kiln-record-9\""},
      {R"({"format":"kiln-record-1","target":"llvm"})", "import line 3: missing field \"workload\""},
      {R"({"format":"kiln-record-1","workload":{"key_hash":"x","canonical_json":"{}"},"target":"llvm","trace":)" +
           good_trace + R"(,"latencies_s":[1e-3],"error":{"kind":"build_error","message":""}})",
       "import line 3: a record needs exactly one of \"latencies_s\" and \"error\""},
      {R"({"format":"kiln-record-1","workload":{"key_hash":"x","canonical_json":"{}"},"target":"llvm","trace":)" +
           good_trace + R"(,"latencies_s":[1e-3]})",
       "import line 3: workload key hash x is not the sha256 of its canonical JSON"},
      {R"({"format":"kiln-record-1","workload":{"key_hash":"","canonical_json":"{}"},"target":"tpu","trace":)" +
           good_trace + R"(,"latencies_s":[1e-3]})",
       "import line 3: bad target: unknown target kind 'tpu'"},
      {R"({"format":"kiln-record-1","workload":{"key_hash":"","canonical_json":"{}"},"target":"llvm","trace":)" +
           good_trace + R"(,"error":{"kind":"oops","message":""}})",
       "import line 3: unknown error kind \"oops\""},
      {R"({"format":"kiln-record-1","workload":{"key_hash":"","canonical_json":"{}"},"target":"llvm","trace":)" +
           good_trace + R"(,"latencies_s":["fast"]})",
       "import line 3: field \"latencies_s\" must hold numbers"},
      // The trace must read as a trace: lookups hand it to compilers to replay.
      {up_to_trace + R"("hello","latencies_s":[1e-3]})",
       "import line 3: field \"trace\" is not a Kiln trace: a trace is a JSON object with an \"instructions\" array"},
      {up_to_trace + R"({"insts":[1,2,3]},"latencies_s":[1e-3]})",
       "import line 3: field \"trace\" is not a Kiln trace: a trace is a JSON object with an \"instructions\" array"},
      {up_to_trace + R"({"instructions":[],"kiln_trace":2},"latencies_s":[1e-3]})",
       "import line 3: field \"trace\" is not a Kiln trace: trace format version 2 is not supported"},
      {up_to_trace + R"({"instructions":[["split"]],"kiln_trace":1},"error":{"kind":"build_error","message":""}})",
       "import line 3: field \"trace\" is not a Kiln trace: trace instruction 0 is not [kind, inputs, attrs, outputs]"},
  };
  size_t first_newline = good_lines.find('\n');
  for (const Case &c : cases) {
    // Two good lines, the bad one, then the rest: the good ones must not land.
    std::string input =
        good_lines.substr(0, first_newline + 1) + "\n" + c.bad_line + "\n" + good_lines.substr(first_newline + 1);
    std::istringstream in(input);
    auto db = Database::open(path, OpenMode::kReadWrite);
    std::string error = db_error_of([&] { db.import_jsonl(in); });
    EXPECT_EQ(error.rfind(c.expected, 0), 0u) << error;
    EXPECT_NE(error.find("nothing was imported"), std::string::npos) << error;
    EXPECT_EQ(db.stats().records, 1);
  }
  EXPECT_EQ(read_bytes(path), before);
}

}  // namespace
}  // namespace kiln::db

namespace kiln::db {
namespace {

// Measurement and database share one ErrorKind; its "no error" value is not an error
// kind a record may carry.
TEST(BadInput, ErrorRecordWithoutAnErrorKindIsRefused) {
  testing::TempDir dir;
  Database db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  std::string message = testing::db_error_of(
      [&] { db.commit({testing::error_record(1, testing::kSkylake, testing::trace("x"), ErrorKind::kNone, "?")}); });
  EXPECT_NE(message.find("other than \"none\""), std::string::npos) << message;
  EXPECT_EQ(db.stats().records, 0);
}

}  // namespace
}  // namespace kiln::db
