// best / top_k: ordering, error records never returned, target fallback.

#include "test_util.h"

#include "database/jsonl.h"
#include "target/target.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

class Lookup : public ::testing::Test {
 protected:
  void SetUp() override {
    db.emplace(Database::open(dir / "t.kdb", OpenMode::kCreate));
    db->commit({
        ok_record(1, kSkylake, R"({"t":"slow"})", {3e-3, 3e-3}),
        ok_record(1, kSkylake, R"({"t":"fast"})", {1e-3, 1.2e-3}),
        ok_record(1, kSkylake, R"({"t":"medium"})", {2e-3}),
        // Errors never count, however they compare.
        error_record(1, kSkylake, R"({"t":"crash"})", ErrorKind::kRuntimeError, "SIGSEGV"),
        error_record(1, kSkylake, R"({"t":"wrong"})", ErrorKind::kWrongResult, "mismatch"),
        // Same model, other core count; another x86 model; another device kind.
        ok_record(1, kSkylake8, R"({"t":"skylake8"})", {5e-3}),
        ok_record(1, kCascadelake, R"({"t":"cascade"})", {0.5e-3}),
        ok_record(1, kCortexA78, R"({"t":"arm"})", {0.1e-3}),
        // Workload 2 has only an error.
        error_record(2, kSkylake, R"({"t":"x"})", ErrorKind::kBuildError, "llc failed"),
    });
  }
  TempDir dir;
  std::optional<Database> db;
  std::string w1 = workload(1).key_hash;
  std::string w2 = workload(2).key_hash;
};

TEST_F(Lookup, BestIsTheLowestMeanLatencyOnTheExactTarget) {
  std::optional<Record> best = db->best(w1, kSkylake);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trace_json, R"({"t":"fast"})");
  EXPECT_EQ(best->target, kSkylake);
  EXPECT_DOUBLE_EQ(best->mean_latency(), 1.1e-3);
}

TEST_F(Lookup, TargetFlagOrderDoesNotMatter) {
  auto best = db->best(w1, "llvm -num-cores=4 -mtriple=x86_64-linux-gnu  -mcpu=skylake", TargetMatch::kExactOnly);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trace_json, R"({"t":"fast"})");
}

TEST_F(Lookup, TopKIsOrderedAndSkipsErrors) {
  std::vector<Record> top = db->top_k(w1, kSkylake, 10, TargetMatch::kExactOnly);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].trace_json, R"({"t":"fast"})");
  EXPECT_EQ(top[1].trace_json, R"({"t":"medium"})");
  EXPECT_EQ(top[2].trace_json, R"({"t":"slow"})");
  EXPECT_EQ(db->top_k(w1, kSkylake, 2, TargetMatch::kExactOnly).size(), 2u);
  EXPECT_TRUE(db->top_k(w1, kSkylake, 0).empty());
}

TEST_F(Lookup, ConfirmedRecordsRankFirstAndCommitsUpdateTheirConfirmation) {
  // The tuning run's re-timing found "medium" at 1.5 ms and "fast" at 1.8 ms (its single
  // measurement leaned low). Committing known programs again only sets the confirmation.
  Record medium = ok_record(1, kSkylake, R"({"t":"medium"})", {2e-3});
  medium.confirmed_latency = 1.5e-3;
  Record fast = ok_record(1, kSkylake, R"({"t":"fast"})", {1e-3, 1.2e-3});
  fast.confirmed_latency = 1.8e-3;
  CommitResult result = db->commit({medium, fast});
  EXPECT_EQ(result.inserted, 0u);
  EXPECT_EQ(result.duplicates, 2u);
  EXPECT_EQ(result.confirmed, 2u);
  std::optional<Record> best = db->best(w1, kSkylake);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trace_json, R"({"t":"medium"})");
  ASSERT_TRUE(best->confirmed_latency);
  EXPECT_DOUBLE_EQ(*best->confirmed_latency, 1.5e-3);
  EXPECT_DOUBLE_EQ(best->mean_latency(), 2e-3);  // the tuning measurement stays as it was
  // Confirmed first, then the unconfirmed by mean; kMeasured keeps the measurement's order.
  std::vector<std::string> order, measured;
  for (const Record &r : db->top_k(w1, kSkylake, 10, TargetMatch::kExactOnly)) order.push_back(r.trace_json);
  for (const Record &r : db->top_k(w1, kSkylake, 10, TargetMatch::kExactOnly, Ranking::kMeasured))
    measured.push_back(r.trace_json);
  EXPECT_EQ(order, (std::vector<std::string>{R"({"t":"medium"})", R"({"t":"fast"})", R"({"t":"slow"})"}));
  EXPECT_EQ(measured, (std::vector<std::string>{R"({"t":"fast"})", R"({"t":"medium"})", R"({"t":"slow"})"}));
  // An error record cannot be confirmed, and a confirmation must be a real latency.
  Record crash = error_record(1, kSkylake, R"({"t":"crash"})", ErrorKind::kRuntimeError, "SIGSEGV");
  crash.confirmed_latency = 1e-3;
  EXPECT_NE(db_error_of([&] { db->commit({crash}); }).find("an error record has no confirmed latency"),
            std::string::npos);
  medium.confirmed_latency = -1;
  EXPECT_NE(db_error_of([&] { db->commit({medium}); }), "");
  // JSON lines carry the confirmation (with a trace the reader accepts).
  Record line = *best;
  line.trace_json = R"({"instructions":[],"kiln_trace":1})";
  Record copied = record_from_jsonl(record_to_jsonl(line));
  ASSERT_TRUE(copied.confirmed_latency);
  EXPECT_DOUBLE_EQ(*copied.confirmed_latency, 1.5e-3);
  line.confirmed_latency.reset();
  EXPECT_FALSE(record_from_jsonl(record_to_jsonl(line)).confirmed_latency);
}

TEST_F(Lookup, AConfirmationReplacesTheLastOneSoConfirmedFiguresComeFromOneBatch) {
  // First batch (a fast phase of the host): "medium" confirmed at 1.0 ms.
  Record medium = ok_record(1, kSkylake, R"({"t":"medium"})", {2e-3});
  medium.confirmed_latency = 1.0e-3;
  EXPECT_EQ(db->commit_confirmation({medium}).confirmed, 1u);
  EXPECT_EQ(db->best(w1, kSkylake)->trace_json, R"({"t":"medium"})");
  // Second batch (a slow phase): "fast" and "slow" side by side. "medium" was not in it,
  // so its figure from another moment no longer competes.
  Record fast = ok_record(1, kSkylake, R"({"t":"fast"})", {1e-3, 1.2e-3});
  fast.confirmed_latency = 1.6e-3;
  Record slow = ok_record(1, kSkylake, R"({"t":"slow"})", {3e-3, 3e-3});
  slow.confirmed_latency = 4e-3;
  CommitResult result = db->commit_confirmation({fast, slow});
  EXPECT_EQ(result.confirmed, 2u);
  std::vector<Record> top = db->top_k(w1, kSkylake, 3, TargetMatch::kExactOnly);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].trace_json, R"({"t":"fast"})");
  EXPECT_EQ(top[1].trace_json, R"({"t":"slow"})");
  EXPECT_EQ(top[2].trace_json, R"({"t":"medium"})");
  EXPECT_FALSE(top[2].confirmed_latency);
  // Other targets keep their confirmations; a confirmation must be of one workload and target.
  Record other = ok_record(1, kCascadelake, R"({"t":"cascade"})", {0.5e-3});
  EXPECT_NE(db_error_of([&] {
              other.confirmed_latency = 1e-3;
              db->commit_confirmation({fast, other});
            }).find("one workload on one target"),
            std::string::npos);
  Record unconfirmed = ok_record(1, kSkylake, R"({"t":"fast"})", {1e-3});
  EXPECT_NE(db_error_of([&] { db->commit_confirmation({unconfirmed}); }).find("confirmed latency"), std::string::npos);
}

TEST_F(Lookup, ErrorOnlyWorkloadHasNoBest) {
  EXPECT_FALSE(db->best(w2, kSkylake));
  EXPECT_TRUE(db->top_k(w2, kSkylake, 5).empty());
  EXPECT_EQ(db->records_of(w2).size(), 1u);  // but the error is stored
  EXPECT_FALSE(db->best(workload(99).key_hash, kSkylake));
}

TEST_F(Lookup, FallbackPrefersSameModelThenSameDeviceKind) {
  // An unseen core count of skylake: the fastest skylake record wins over the
  // even faster cascadelake one, because it is the same model.
  const char *skylake16 = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=16";
  auto same_model = db->best(w1, skylake16);
  ASSERT_TRUE(same_model);
  EXPECT_EQ(same_model->trace_json, R"({"t":"fast"})");

  // An unseen x86 model: the fastest x86 record, never the aarch64 one.
  const char *icelake = "llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server -num-cores=4";
  auto same_kind = db->best(w1, icelake);
  ASSERT_TRUE(same_kind);
  EXPECT_EQ(same_kind->trace_json, R"({"t":"cascade"})");

  std::vector<Record> top = db->top_k(w1, skylake16, 10);
  ASSERT_EQ(top.size(), 5u);  // skylake by latency (4 cores, then 8), then cascadelake; no arm
  EXPECT_EQ(top[0].trace_json, R"({"t":"fast"})");
  EXPECT_EQ(top[3].trace_json, R"({"t":"skylake8"})");
  EXPECT_EQ(top[4].trace_json, R"({"t":"cascade"})");
}

TEST_F(Lookup, FallbackPrefersRecordsOfTheSameVectorWidth) {
  // An AVX2 CPU without records of its own gets the fastest AVX2 (skylake) record,
  // not the faster AVX-512 (cascadelake) one: its schedule assumes 16-lane vectors.
  auto avx2 = db->best(w1, "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2");
  ASSERT_TRUE(avx2);
  EXPECT_EQ(avx2->trace_json, R"({"t":"fast"})");
  // And an AVX-512 CPU gets the AVX-512 record, although skylake's are many.
  auto avx512 = db->best(w1, "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -num-cores=2");
  ASSERT_TRUE(avx512);
  EXPECT_EQ(avx512->trace_json, R"({"t":"cascade"})");
}

TEST_F(Lookup, NativeLooksUpThisHostsCpuAndLegacyNativeRecordsStayApart) {
  // A record an older Kiln stored under -mcpu=native, imported: which machine it was
  // measured on is unknown, so it keeps its label and is never an exact match.
  Record legacy = ok_record(3, "llvm -mcpu=native -mtriple=x86_64-linux-gnu -num-cores=2", trace("legacy"), {1e-4});
  std::istringstream line(record_to_jsonl(legacy) + "\n");
  ASSERT_EQ(db->import_jsonl(line).inserted, 1u);
  std::string w3 = workload(3).key_hash;
  std::vector<Record> stored = db->records_of(w3);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].target, "llvm -mcpu=native -mtriple=x86_64-linux-gnu -num-cores=2");
  EXPECT_FALSE(db->best(w3, "llvm -mcpu=native -num-cores=2", TargetMatch::kExactOnly));
  auto fallback = db->best(w3, "llvm -mcpu=native -num-cores=2");
  ASSERT_TRUE(fallback);
  EXPECT_EQ(fallback->trace_json, trace("legacy"));

  // A record committed here under native is this host's: stored under its CPU, and
  // found exactly by a native lookup on this host.
  db->commit({ok_record(3, "llvm -mcpu=native -num-cores=2", R"({"t":"here"})", {2e-4})});
  auto here = db->best(w3, "llvm -mcpu=native -num-cores=2", TargetMatch::kExactOnly);
  ASSERT_TRUE(here);
  EXPECT_EQ(here->trace_json, R"({"t":"here"})");
  EXPECT_EQ(here->target, "llvm -mcpu=" + host_cpu() + " -mtriple=" + host_triple() + " -num-cores=2");
  // The legacy record, faster, ranks after every record of the host's vector width.
  std::vector<Record> top = db->top_k(w3, "llvm -mcpu=native -num-cores=2", 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[1].trace_json, trace("legacy"));
}

TEST_F(Lookup, ExactTargetIsPreferredOverFasterFallbacks) {
  std::vector<Record> top = db->top_k(w1, kSkylake, 5);
  ASSERT_EQ(top.size(), 5u);
  EXPECT_EQ(top[0].target, kSkylake);
  EXPECT_EQ(top[2].target, kSkylake);
  EXPECT_EQ(top[3].trace_json, R"({"t":"skylake8"})");
  EXPECT_EQ(top[4].trace_json, R"({"t":"cascade"})");
}

TEST_F(Lookup, FallbackCanBeTurnedOff) {
  const char *icelake = "llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server -num-cores=4";
  EXPECT_FALSE(db->best(w1, icelake, TargetMatch::kExactOnly));
  EXPECT_TRUE(db->top_k(w1, icelake, 3, TargetMatch::kExactOnly).empty());
  EXPECT_FALSE(db->best(w1, "cuda -arch=sm_90"));  // no cuda record at all
}

TEST_F(Lookup, CudaFallsBackAcrossArchitectures) {
  db->commit({ok_record(1, "cuda -arch=sm_80", R"({"t":"gpu"})", {1e-5})});
  auto best = db->best(w1, "cuda -arch=sm_90");
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trace_json, R"({"t":"gpu"})");
  EXPECT_FALSE(db->best(w1, "cuda -arch=sm_90", TargetMatch::kExactOnly));
}

TEST_F(Lookup, BadLookupTargetIsAnError) {
  EXPECT_NE(db_error_of([&] { db->best(w1, "llvm -mcpu"); }).find("bad flag '-mcpu'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::db
