// Export/import round trip, idempotent import, and the stats/prune views.

#include "database/jsonl.h"
#include "database/schema.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

std::vector<Record> sample() {
  Record a = ok_record(1, kSkylake, trace("a"), {1e-3, 0.9e-3});
  a.created_at_ms = 1700000000000;
  Record b = error_record(1, kCortexA78, trace("b"), ErrorKind::kLoadError, "dlopen: \"undefined symbol\"\n");
  b.created_at_ms = 1700000000001;
  Record c = ok_record(2, "cuda -arch=sm_90", trace("c"), {2.5e-6});
  c.created_at_ms = 1700000000002;
  return {a, b, c};
}

void expect_same_records(const std::vector<Record> &x, const std::vector<Record> &y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].workload, y[i].workload);
    EXPECT_EQ(x[i].target, y[i].target);
    EXPECT_EQ(x[i].trace_json, y[i].trace_json);
    EXPECT_EQ(x[i].outcome, y[i].outcome);
    EXPECT_EQ(x[i].metadata, y[i].metadata);
    EXPECT_EQ(x[i].kiln_version, y[i].kiln_version);
    EXPECT_EQ(x[i].created_at_ms, y[i].created_at_ms);
  }
}

TEST(Jsonl, ExportImportRoundTripsEveryRecord) {
  TempDir dir;
  auto source = Database::open(dir / "a.kdb", OpenMode::kCreate);
  source.commit(sample());
  std::ostringstream out;
  EXPECT_EQ(source.export_jsonl(out), 3u);

  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  nlohmann::json first = nlohmann::json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(first["format"], "kiln-record-1");
  EXPECT_EQ(first["trace"], nlohmann::json::parse(trace("a")));      // embedded, not a string
  EXPECT_EQ(first["workload"]["canonical_json"], workload_json(1));  // a string: hashed bytes

  auto copy = Database::open(dir / "b.kdb", OpenMode::kCreate);
  std::istringstream in(text);
  CommitResult imported = copy.import_jsonl(in);
  EXPECT_EQ(imported.inserted, 3u);
  expect_same_records(source.records_of(workload(1).key_hash), copy.records_of(workload(1).key_hash));
  expect_same_records(source.records_of(workload(2).key_hash), copy.records_of(workload(2).key_hash));

  // Importing the same file again adds nothing.
  std::istringstream again(text);
  CommitResult second = copy.import_jsonl(again);
  EXPECT_EQ(second.inserted, 0u);
  EXPECT_EQ(second.duplicates, 3u);
  EXPECT_EQ(copy.stats().records, 3);
}

TEST(Jsonl, LineRoundTripIsExact) {
  for (const Record &r : sample()) {
    Record back = record_from_jsonl(record_to_jsonl(r));
    expect_same_records({r}, {back});
  }
}

TEST(Stats, CountsRecordsErrorsAndTargets) {
  TempDir dir;
  auto db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  db.commit(sample());
  db.commit({error_record(3, kSkylake, "{}", ErrorKind::kLoadError, "x")});
  Stats s = db.stats();
  EXPECT_EQ(s.schema_version, kSchemaVersion);
  EXPECT_EQ(s.workloads, 3);
  EXPECT_EQ(s.records, 4);
  EXPECT_EQ(s.successful, 2);
  EXPECT_EQ(s.errors, 2);
  ASSERT_EQ(s.errors_by_kind.size(), 1u);
  EXPECT_EQ(s.errors_by_kind[0], (std::pair<std::string, int64_t>{"load_error", 2}));
  ASSERT_EQ(s.targets.size(), 3u);
  EXPECT_EQ(s.targets[0].target, "cuda -arch=sm_90");
  EXPECT_EQ(s.targets[2].target, kSkylake);
  EXPECT_EQ(s.targets[2].records, 2);
  EXPECT_EQ(s.targets[2].successful, 1);
}

TEST(Prune, KeepsTheNFastestPerWorkloadAndTarget) {
  TempDir dir;
  auto db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  std::vector<Record> records;
  for (int i = 0; i < 10; ++i) {
    std::string trace = "{\"i\":" + std::to_string(i) + "}";
    records.push_back(ok_record(1, kSkylake, trace, {(10 - i) * 1e-3}));   // fastest: i = 9, 8
    records.push_back(ok_record(1, kCortexA78, trace, {(i + 1) * 1e-3}));  // fastest: i = 0, 1
  }
  records.push_back(error_record(1, kSkylake, R"({"e":1})", ErrorKind::kRunTimeout, "10 s"));
  records.push_back(error_record(2, kSkylake, R"({"e":2})", ErrorKind::kRunTimeout, "10 s"));
  db.commit(records);

  EXPECT_EQ(db.prune(2), 18u);  // 8 + 8 slower records, 2 errors
  std::vector<Record> left = db.records_of(workload(1).key_hash);
  ASSERT_EQ(left.size(), 4u);
  EXPECT_EQ(db.top_k(workload(1).key_hash, kSkylake, 5)[0].trace_json, R"({"i":9})");
  EXPECT_EQ(db.top_k(workload(1).key_hash, kSkylake, 5, TargetMatch::kExactOnly).size(), 2u);
  EXPECT_EQ(db.top_k(workload(1).key_hash, kCortexA78, 5)[1].trace_json, R"({"i":1})");
  Stats s = db.stats();
  EXPECT_EQ(s.errors, 0);
  EXPECT_EQ(s.workloads, 1);  // workload 2 had only an error
  EXPECT_EQ(db.prune(2), 0u);
}

}  // namespace
}  // namespace kiln::db

namespace kiln::db {
namespace {

// JSON nested 100k deep anywhere in a line (a trace's attribute, the metadata) is
// refused before anything walks it recursively; it used to overflow the stack.
TEST(Jsonl, DeeplyNestedPartsAreRefusedNotCrashed) {
  std::string line = record_to_jsonl(testing::ok_record(1, testing::kSkylake, testing::trace("a"), {1e-3}));
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string &where : {std::string("\"metadata\":{"), std::string("\"trace\":{")}) {
    std::string bad = line;
    size_t at = bad.find(where);
    ASSERT_NE(at, std::string::npos) << where;
    size_t after = at + where.size();
    bad.insert(after, "\"deep\":" + deep + (bad[after] == '}' ? "" : ","));
    std::string message = testing::db_error_of([&] { record_from_jsonl(bad); });
    EXPECT_NE(message.find("nests deeper than 64 levels"), std::string::npos) << where << ": " << message;
  }
}

}  // namespace
}  // namespace kiln::db
