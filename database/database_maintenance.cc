// Statistics and pruning.

#include "database/database.h"

#include "database/database_impl.h"
#include "database/prepared_record.h"
#include "target/target.h"

namespace kiln::db {

Stats Database::stats() {
  impl_->reopen_if_changed();
  return with_lock_retry(impl_->path, [&] {
    sqlite::Connection &conn = impl_->conn;
    // One read transaction so the counts agree with each other.
    conn.exec("BEGIN");
    Stats s;
    try {
      s.schema_version = impl_->version;
      s.workloads = conn.query_int("SELECT count(*) FROM workloads");
      s.records = conn.query_int("SELECT count(*) FROM records");
      s.successful = conn.query_int("SELECT count(*) FROM records WHERE mean_latency IS NOT NULL");
      s.errors = s.records - s.successful;
      s.unusable = conn.query_int("SELECT count(*) FROM records r WHERE mean_latency IS NOT NULL AND NOT " +
                                  std::string(kUsableRecord));
      s.disputed = conn.query_int("SELECT count(*) FROM records r WHERE mean_latency IS NOT NULL AND " +
                                  std::string(kUsableRecord) + " AND NOT " + std::string(kUndisputedRecord));
      sqlite::Statement kinds(conn.get(),
                              "SELECT error_kind, count(*) FROM records WHERE error_kind IS NOT NULL "
                              "GROUP BY error_kind ORDER BY error_kind");
      while (kinds.step()) s.errors_by_kind.emplace_back(kinds.column_text(0), kinds.column_int(1));
      sqlite::Statement targets(conn.get(),
                                "SELECT target, count(*), count(mean_latency) FROM records "
                                "GROUP BY target ORDER BY target");
      while (targets.step())
        s.targets.push_back({targets.column_text(0), targets.column_int(1), targets.column_int(2)});
    } catch (...) {
      conn.exec("ROLLBACK");
      throw;
    }
    conn.exec("COMMIT");
    return s;
  });
}

size_t Database::prune(size_t keep_per_target) {
  int64_t deleted = 0;
  impl_->write_transaction([&] {
    sqlite::Statement del(impl_->conn.get(),
                          "DELETE FROM records AS r WHERE mean_latency IS NULL OR NOT " + std::string(kUsableRecord) +
                              " OR id IN ("
                              "  SELECT id FROM ("
                              "    SELECT id, ROW_NUMBER() OVER ("
                              "      PARTITION BY workload_id, target ORDER BY (confirmed_latency IS NULL), "
                              "        coalesce(confirmed_latency, mean_latency), id) AS rank"
                              "    FROM records r WHERE mean_latency IS NOT NULL AND " +
                              std::string(kUsableRecord) +
                              ")"
                              "  WHERE rank > ?1)");
    del.bind(1, static_cast<int64_t>(keep_per_target));
    del.step();
    deleted = impl_->conn.changes();
    impl_->conn.exec("DELETE FROM workloads WHERE id NOT IN (SELECT workload_id FROM records)");
  });
  return static_cast<size_t>(deleted);
}

std::pair<size_t, size_t> Database::retarget(std::string_view from_text, std::string_view to_text) {
  Target from, to;
  try {
    from = Target::parse(from_text, NativeCpu::kKeepAsStored);
    // `native` alone: this host's CPU, as `llvm -mcpu=native` says it.
    to = Target::parse(to_text == "native" ? std::string_view("llvm -mcpu=native") : to_text);
  } catch (const std::invalid_argument &e) {
    throw DbError(std::string("bad target: ") + e.what());
  }
  if (from.str() == to.str())
    throw DbError("--from and --to are the same target (" + to.str() +
                  "): nothing would move; give as --to the "
                  "target the records were measured on");
  if (from.device_kind() != to.device_kind())
    throw DbError("records of " + from.str() + " (" + from.device_kind() + ") cannot move to " + to.str() + " (" +
                  to.device_kind() + "): their programs were built for another kind of device");
  int64_t moved = 0, left = 0;
  impl_->write_transaction([&] {
    // OR IGNORE: a trace `to` already holds is one record per (workload, target, trace).
    sqlite::Statement move(impl_->conn.get(),
                           "UPDATE OR IGNORE records SET target = ?1, device_kind = ?2, "
                           "device_model = ?3 WHERE target = ?4");
    move.bind(1, to.str()).bind(2, to.device_kind()).bind(3, to.device_model()).bind(4, from.str());
    move.step();
    moved = impl_->conn.changes();
    sqlite::Statement count(impl_->conn.get(), "SELECT count(*) FROM records WHERE target = ?1");
    count.bind(1, from.str());
    count.step();
    left = count.column_int(0);
  });
  return {static_cast<size_t>(moved), static_cast<size_t>(left)};
}

}  // namespace kiln::db
