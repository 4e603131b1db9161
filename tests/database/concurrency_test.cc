// Several processes writing one file at once, and a writer killed mid-batch.

#include "database/schema.h"
#include "test_util.h"
#include "writer_process.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

TEST(Concurrency, FourProcessesCommitFortyThousandRecordsExactlyOnce) {
  constexpr int kWriters = 4, kBatches = 100, kBatchSize = 100;
  TempDir dir;
  std::string path = (dir / "shared.kdb").string();
  // The file does not exist yet: the writers also race to create the schema.
  std::vector<std::unique_ptr<WriterProcess>> writers;
  for (int w = 0; w < kWriters; ++w) writers.push_back(std::make_unique<WriterProcess>(path, w, kBatches, kBatchSize));
  for (auto &writer : writers) {
    int reported = 0;
    while (writer->next_committed_batch() >= 0) ++reported;
    EXPECT_EQ(reported, kBatches);
    EXPECT_EQ(writer->wait(), 0);
  }

  EXPECT_EQ(sqlite_query_text(path, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(sqlite_query_text(path, "SELECT count(*) FROM records"), "40000");
  EXPECT_EQ(sqlite_query_text(path, "SELECT count(DISTINCT trace_json) FROM records"), "40000");
  EXPECT_EQ(sqlite_query_text(path,
                              "SELECT count(*) FROM (SELECT DISTINCT json_extract(trace_json, '$.writer'), "
                              "json_extract(trace_json, '$.batch'), json_extract(trace_json, '$.i') "
                              "FROM records)"),
            "40000");
  EXPECT_EQ(sqlite_query_text(path, "SELECT count(*) FROM workloads"), "20");
  EXPECT_EQ(sqlite_query_text(path, "SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  auto db = Database::open(path, OpenMode::kReadOnly);
  Stats s = db.stats();
  EXPECT_EQ(s.records, 40000);
  EXPECT_EQ(s.errors, 4000);  // every tenth record is a run_timeout
}

TEST(Crash, KilledWriterLosesOnlyItsUncommittedBatch) {
  constexpr int kBatchSize = 50;
  TempDir dir;
  std::string path = (dir / "crash.kdb").string();
  std::set<int> reported;
  {
    WriterProcess writer(path, /*writer=*/7, /*batches=*/1000000, kBatchSize);
    while (reported.size() < 30) {
      int batch = writer.next_committed_batch();
      ASSERT_GE(batch, 0) << "writer exited early";
      reported.insert(batch);
    }
    writer.kill_now();
    // Reports already in the pipe were committed too.
    for (int batch; (batch = writer.next_committed_batch()) >= 0;) reported.insert(batch);
    EXPECT_EQ(writer.wait(), 128 + SIGKILL);
  }

  auto db = Database::open(path, OpenMode::kReadWrite);  // recovers the WAL
  EXPECT_EQ(sqlite_query_text(path, "PRAGMA integrity_check"), "ok");
  // Every reported batch is complete; no batch is partial (transactions are atomic).
  for (int batch : reported)
    EXPECT_EQ(sqlite_query_text(path, "SELECT count(*) FROM records WHERE json_extract(trace_json, '$.batch') = " +
                                          std::to_string(batch)),
              std::to_string(kBatchSize))
        << "batch " << batch;
  EXPECT_EQ(sqlite_query_text(path,
                              "SELECT count(*) FROM (SELECT json_extract(trace_json, '$.batch') AS b, "
                              "count(*) AS n FROM records GROUP BY b) WHERE n <> " +
                                  std::to_string(kBatchSize)),
            "0");
  // At most one batch may have committed after its report was lost with the process.
  int64_t stored = db.stats().records;
  EXPECT_GE(stored, static_cast<int64_t>(reported.size()) * kBatchSize);
  EXPECT_LE(stored, static_cast<int64_t>(reported.size() + 1) * kBatchSize);
  // The file is usable for writing again.
  EXPECT_EQ(db.commit({ok_record(1, kSkylake, "{}", {1e-3})}).inserted, 1u);
}

}  // namespace
}  // namespace kiln::db
