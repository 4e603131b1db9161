// SQLite RAII wrappers: error mapping, statements, connections.

#include "database/sqlite.h"

#include <sqlite3.h>

#include <cstring>
#include <utility>

namespace kiln::db::sqlite {

static std::string cant_open_reason(sqlite3 *db, int rc) {
  std::string reason = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (int system_errno = db ? sqlite3_system_errno(db) : 0)
    reason += std::string(" (") + std::strerror(system_errno) + ")";
  return reason;
}

void throw_error(sqlite3 *db, int rc, std::string_view what) {
  std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string message = std::string(what) + ": " + detail;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw BusyError(message);
    case SQLITE_CANTOPEN:
      throw CantOpenError(message, cant_open_reason(db, rc));
    case SQLITE_READONLY:
      throw ReadOnlyError(message);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: {
      // Without `what`: the statement that first read the file says nothing about what is wrong with it.
      const char *file = db ? sqlite3_db_filename(db, "main") : nullptr;
      throw CorruptError("file " + std::string(file ? file : "?") + " is not a Kiln database or is corrupt: " + detail +
                         "; restore it from a backup or an export");
    }
    default:
      throw DbError(message);
  }
}

Statement::Statement(sqlite3 *db, std::string_view sql) : db_(db) {
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_error(db, rc, "preparing '" + std::string(sql.substr(0, 60)) + "'");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement &&other) noexcept : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement &Statement::bind(int index, int64_t value) {
  if (int rc = sqlite3_bind_int64(stmt_, index, value); rc != SQLITE_OK) throw_error(db_, rc, "binding an integer");
  return *this;
}

Statement &Statement::bind(int index, double value) {
  if (int rc = sqlite3_bind_double(stmt_, index, value); rc != SQLITE_OK) throw_error(db_, rc, "binding a real");
  return *this;
}

Statement &Statement::bind(int index, std::string_view value) {
  // SQLITE_TRANSIENT: SQLite copies, so callers may pass temporaries.
  if (int rc = sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
      rc != SQLITE_OK)
    throw_error(db_, rc, "binding text");
  return *this;
}

Statement &Statement::bind_null(int index) {
  if (int rc = sqlite3_bind_null(stmt_, index); rc != SQLITE_OK) throw_error(db_, rc, "binding NULL");
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_error(db_, rc, "running '" + std::string(std::string_view(sqlite3_sql(stmt_)).substr(0, 60)) + "'");
}

void Statement::reset() noexcept {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

int64_t Statement::column_int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const unsigned char *text = sqlite3_column_text(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  return text ? std::string(reinterpret_cast<const char *>(text), static_cast<size_t>(size)) : std::string();
}

Connection::Connection(const std::string &path, int flags) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    std::string reason = cant_open_reason(db_, rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    if ((rc & 0xff) == SQLITE_CANTOPEN) throw CantOpenError("cannot open database " + path + ": " + message, reason);
    throw DbError("cannot open database " + path + ": " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Connection::~Connection() { sqlite3_close_v2(db_); }

Connection::Connection(Connection &&other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Connection &Connection::operator=(Connection &&other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

void Connection::exec(std::string_view sql) {
  std::string text(sql);
  char *error = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return;
  sqlite3_free(error);
  throw_error(db_, rc, "running '" + text.substr(0, 60) + "'");
}

int64_t Connection::query_int(std::string_view sql) {
  Statement s(db_, sql);
  if (!s.step()) throw DbError("query returned no row: " + std::string(sql));
  return s.column_int(0);
}

int64_t Connection::changes() const { return sqlite3_changes64(db_); }

}  // namespace kiln::db::sqlite
