// Thin RAII wrappers over the SQLite C API, private to the database folder.
// They turn every SQLite failure into a DbError carrying SQLite's message,
// and a lock conflict into a BusyError so that callers can retry.

#pragma once

#include "database/error.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::db::sqlite {

/// Another connection holds a lock we need; the whole transaction may be retried.
class BusyError : public DbError {
 public:
  using DbError::DbError;
};

/// The file is not an SQLite database, or SQLite found it damaged.
class CorruptError : public DbError {
 public:
  using DbError::DbError;
};

/// A write to a database SQLite could open for reading only (the file, or the folder
/// where its -wal and -shm files go, is not writable).
class ReadOnlyError : public DbError {
 public:
  using DbError::DbError;
};

/// SQLite cannot open a file it needs: the database, or beside a WAL-mode
/// database its -wal or -shm file.
class CantOpenError : public DbError {
 public:
  CantOpenError(const std::string &message, std::string reason) : DbError(message), reason_(std::move(reason)) {}
  /// SQLite's and the system's words alone, e.g. "unable to open database file (Permission denied)".
  const std::string &reason() const { return reason_; }

 private:
  std::string reason_;
};

/// A prepared statement. Move-only; finalized on destruction.
class Statement {
 public:
  Statement(sqlite3 *db, std::string_view sql);
  ~Statement();
  Statement(Statement &&other) noexcept;
  Statement &operator=(Statement &&) = delete;
  Statement(const Statement &) = delete;

  Statement &bind(int index, int64_t value);
  Statement &bind(int index, double value);
  Statement &bind(int index, std::string_view value);
  Statement &bind_null(int index);

  /// Runs one step: true when a row is ready, false when the statement is done.
  bool step();
  /// Resets the statement and clears its bindings. A SELECT left unreset holds
  /// its read snapshot open, which blocks WAL checkpoints, so every use ends here.
  void reset() noexcept;

  bool is_null(int column) const;
  int64_t column_int(int column) const;
  double column_double(int column) const;
  std::string column_text(int column) const;

 private:
  sqlite3 *db_;
  sqlite3_stmt *stmt_ = nullptr;
};

/// Resets a statement when the scope ends, on every path.
class ResetOnExit {
 public:
  explicit ResetOnExit(Statement &s) : s_(s) { s_.reset(); }
  ~ResetOnExit() { s_.reset(); }
  ResetOnExit(const ResetOnExit &) = delete;

 private:
  Statement &s_;
};

/// An open SQLite connection. Move-only; closed on destruction.
class Connection {
 public:
  /// `flags` are SQLITE_OPEN_* flags; with SQLITE_OPEN_URI, `path` may be a file: URI.
  Connection(const std::string &path, int flags);
  ~Connection();
  Connection(Connection &&other) noexcept;
  /// Closes this connection and takes over `other`'s. Finalize its statements first.
  Connection &operator=(Connection &&other) noexcept;
  Connection(const Connection &) = delete;

  /// Runs one or more statements that return no rows.
  void exec(std::string_view sql);
  /// Runs a statement returning one integer (e.g. a PRAGMA or count).
  int64_t query_int(std::string_view sql);
  /// Rows changed by the last INSERT/UPDATE/DELETE.
  int64_t changes() const;
  sqlite3 *get() const { return db_; }

 private:
  sqlite3 *db_ = nullptr;
};

/// Throws the right error type for SQLite result code `rc` on connection `db`.
[[noreturn]] void throw_error(sqlite3 *db, int rc, std::string_view what);

}  // namespace kiln::db::sqlite
