// Helpers shared by the database tests: temporary directories, record
// builders, and raw SQLite access for checks the library does not expose.

#pragma once

#include "database/database.h"
#include "support/sha256.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::db::testing {

/// A fresh directory removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-db-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  std::filesystem::path operator/(const std::string &name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Canonical target strings (Target::str), so tests can compare stored targets.
inline constexpr const char *kSkylake = "llvm -mcpu=skylake -mtriple=x86_64-linux-gnu -num-cores=4";
inline constexpr const char *kSkylake8 = "llvm -mcpu=skylake -mtriple=x86_64-linux-gnu -num-cores=8";
inline constexpr const char *kCascadelake = "llvm -mcpu=cascadelake -mtriple=x86_64-linux-gnu -num-cores=4";
inline constexpr const char *kCortexA78 = "llvm -mcpu=cortex-a78 -mtriple=aarch64-linux-gnu -num-cores=4";

inline std::string workload_json(int n) {
  return R"({"ops":[{"op":"matmul","shape":[)" + std::to_string(n) + R"(,64,64]}],"version":1})";
}

inline Workload workload(int n) {
  std::string json = workload_json(n);
  return Workload{support::sha256_hex(json), json, "matmul", std::to_string(n) + "x64x64"};
}

/// A trace as Trace::to_json writes it (keys sorted), one per `name`. Commit
/// stores any JSON; import accepts only traces that Trace::from_json reads.
inline std::string trace(const std::string &name) {
  return R"({"instructions":[["get_block",[],{"name":")" + name + R"("},["b0"]]],"kiln_trace":1})";
}

inline Record ok_record(int workload_n, const std::string &target, const std::string &trace,
                        std::vector<double> latencies) {
  Record r;
  r.workload = workload(workload_n);
  r.target = target;
  r.trace_json = trace;
  r.outcome = std::move(latencies);
  r.metadata = RecordMetadata::from_json(nlohmann::json::parse(R"({"number":10,"repeat":3})"));
  return r;
}

inline Record error_record(int workload_n, const std::string &target, const std::string &trace, ErrorKind kind,
                           std::string message) {
  Record r = ok_record(workload_n, target, trace, {});
  r.outcome = MeasureError{kind, std::move(message)};
  return r;
}

inline std::string read_bytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs a query returning one text value on a raw SQLite connection.
inline std::string sqlite_query_text(const std::filesystem::path &path, const std::string &sql) {
  sqlite3 *db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open " + path.string());
  }
  sqlite3_stmt *stmt = nullptr;
  std::string result;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char *text = sqlite3_column_text(stmt, 0);
    result = text ? reinterpret_cast<const char *>(text) : "NULL";
  } else {
    result = std::string("error: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return result;
}

/// Runs statements that return nothing on a raw SQLite connection.
inline void sqlite_exec(const std::filesystem::path &path, const std::string &sql) {
  sqlite3 *db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  char *error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error("sqlite: " + message);
}

/// Catches the DbError `body` throws and returns its message.
template <class F>
std::string db_error_of(F &&body) {
  try {
    body();
  } catch (const DbError &e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace kiln::db::testing
