// A writer process for the concurrency and crash tests. Commits `batches`
// batches of `batch_size` records, one transaction each, and after each
// commit prints "committed <batch>" on stdout, flushed, so the parent knows
// exactly which batches were durable when it killed us.
//
// usage: kiln_db_test_writer DB WRITER_ID BATCHES BATCH_SIZE

#include "database/database.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DB WRITER_ID BATCHES BATCH_SIZE\n", argv[0]);
    return 2;
  }
  std::string path = argv[1];
  int writer = std::atoi(argv[2]);
  int batches = std::atoi(argv[3]);
  int batch_size = std::atoi(argv[4]);
  try {
    auto db = kiln::db::Database::open(path, kiln::db::OpenMode::kCreate);
    for (int b = 0; b < batches; ++b) {
      std::vector<kiln::db::Record> batch;
      batch.reserve(batch_size);
      for (int i = 0; i < batch_size; ++i) {
        kiln::db::Record r;
        // 20 workloads shared by every writer, so writers contend on rows too.
        int w = (b * batch_size + i) % 20;
        r.workload.canonical_json = R"({"ops":[{"op":"conv2d","n":)" + std::to_string(w) + "}],\"version\":1}";
        r.target = (i % 2) ? "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=2"
                           : "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2";
        r.trace_json = R"({"writer":)" + std::to_string(writer) + R"(,"batch":)" + std::to_string(b) + R"(,"i":)" +
                       std::to_string(i) + "}";
        if (i % 10 == 9)
          r.outcome = kiln::db::MeasureError{kiln::db::ErrorKind::kRunTimeout, "timed out after 10 s"};
        else
          r.outcome = std::vector<double>{1e-4 * (1 + (i * 7 + b) % 97), 1.1e-4};
        batch.push_back(std::move(r));
      }
      db.commit(batch);
      std::printf("committed %d\n", b);
      std::fflush(stdout);
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "writer %d: %s\n", writer, e.what());
    return 1;
  }
  return 0;
}
