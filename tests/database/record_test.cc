// Committing and reading back records: exact round trip, duplicates,
// validation of every field, sha256 vectors behind workload keys.

#include "test_util.h"

#include <gtest/gtest.h>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

TEST(Sha256, MatchesKnownVectors) {
  EXPECT_EQ(support::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(support::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Records, RoundTripEveryField) {
  TempDir dir;
  auto db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  Record ok = ok_record(1, kSkylake, R"({"insts":[{"kind":"split","factors":[4,16]}]})", {1.5e-4, 1.25e-4, 1.0e-4});
  ok.kiln_version = "9.9.9";
  ok.created_at_ms = 1700000000123;
  Record bad = error_record(1, kSkylake, R"({"insts":[]})", ErrorKind::kWrongResult, "max abs error 0.5 at [3,4]");
  CommitResult result = db.commit({ok, bad});
  EXPECT_EQ(result.inserted, 2u);
  EXPECT_EQ(result.duplicates, 0u);

  std::vector<Record> back = db.records_of(workload(1).key_hash);
  ASSERT_EQ(back.size(), 2u);
  const Record &a = back[0];
  EXPECT_GT(a.id, 0);
  EXPECT_EQ(a.workload, ok.workload);
  EXPECT_EQ(a.target, kSkylake);                                                // already canonical
  EXPECT_EQ(a.trace_json, R"({"insts":[{"factors":[4,16],"kind":"split"}]})");  // keys sorted
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.latencies(), (std::vector<double>{1.5e-4, 1.25e-4, 1.0e-4}));  // bit-exact doubles
  EXPECT_DOUBLE_EQ(a.mean_latency(), 1.25e-4);
  EXPECT_EQ(a.metadata.to_json().dump(), R"({"number":10,"repeat":3})");  // a key Kiln does not know is kept
  EXPECT_EQ(a.metadata.number, 10);
  EXPECT_EQ(a.kiln_version, "9.9.9");
  EXPECT_EQ(a.created_at_ms, 1700000000123);

  const Record &b = back[1];
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), (MeasureError{ErrorKind::kWrongResult, "max abs error 0.5 at [3,4]"}));
  EXPECT_EQ(b.kiln_version, kiln_version());
  EXPECT_GT(b.created_at_ms, 1700000000000);
}

TEST(Records, SameTraceTwiceIsOneRecordWhateverItsSpelling) {
  TempDir dir;
  auto db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  db.commit({ok_record(1, kSkylake, R"({"a":1,"b":2})", {1e-3})});
  // Same trace with other key order and spacing, target with other flag order.
  CommitResult again = db.commit(
      {ok_record(1, "llvm -num-cores=4 -mcpu=skylake -mtriple=x86_64-linux-gnu", R"({ "b": 2, "a": 1 })", {2e-3})});
  EXPECT_EQ(again.inserted, 0u);
  EXPECT_EQ(again.duplicates, 1u);
  // The same trace on another target is another fact.
  EXPECT_EQ(db.commit({ok_record(1, kCascadelake, R"({"a":1,"b":2})", {1e-3})}).inserted, 1u);
  EXPECT_EQ(db.records_of(workload(1).key_hash).size(), 2u);
}

TEST(Records, InvalidRecordRejectsWholeBatch) {
  TempDir dir;
  auto db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  Record good = ok_record(1, kSkylake, "{}", {1e-3});

  Record bad_hash = good;
  bad_hash.workload.key_hash = std::string(64, 'a');
  EXPECT_NE(db_error_of([&] { db.commit({good, bad_hash}); }).find("record 1 of 2 not committed"), std::string::npos);
  EXPECT_NE(db_error_of([&] { db.commit({bad_hash}); }).find("is not the sha256 of its canonical JSON"),
            std::string::npos);

  Record bad_target = good;
  bad_target.target = "vulkan";
  EXPECT_NE(db_error_of([&] { db.commit({bad_target}); }).find("unknown target kind 'vulkan'"), std::string::npos);

  Record bad_trace = good;
  bad_trace.trace_json = "{not json";
  EXPECT_NE(db_error_of([&] { db.commit({bad_trace}); }).find("trace is not valid JSON"), std::string::npos);

  Record no_latency = good;
  no_latency.outcome = std::vector<double>{};
  EXPECT_NE(db_error_of([&] { db.commit({no_latency}); }).find("at least one latency"), std::string::npos);

  Record negative = good;
  negative.outcome = std::vector<double>{1e-3, -1.0};
  EXPECT_NE(db_error_of([&] { db.commit({negative}); }).find("not a positive finite"), std::string::npos);

  EXPECT_NE(
      db_error_of([] { RecordMetadata::from_json(nlohmann::json::array({1})); }).find("metadata must be a JSON object"),
      std::string::npos);
  EXPECT_NE(db_error_of([] {
              RecordMetadata::from_json({{"sketch_instructions", "twelve"}});
            }).find("metadata 'sketch_instructions' must be a non-negative integer"),
            std::string::npos);

  EXPECT_EQ(db.stats().records, 0);  // the good record of the failed batches was not stored
}

TEST(Records, EmptyHashIsComputedFromCanonicalJson) {
  TempDir dir;
  auto db = Database::open(dir / "t.kdb", OpenMode::kCreate);
  Record r = ok_record(3, kSkylake, "{}", {1e-3});
  r.workload.key_hash.clear();
  db.commit({r});
  EXPECT_EQ(db.records_of(support::sha256_hex(workload_json(3))).size(), 1u);
  EXPECT_EQ(workload_hash_of(workload_json(3)), support::sha256_hex(workload_json(3)));
}

}  // namespace
}  // namespace kiln::db
