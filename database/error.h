// The one exception type the database throws for user and environment errors.

#pragma once

#include <stdexcept>
#include <string>

namespace kiln::db {

/// A database failure the caller can act on: a bad file, a newer schema, a
/// malformed record or import line, a lock held too long. The message says
/// what was wrong and what to do.
class DbError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A malformed argument of a lookup (a workload that is neither a key hash nor JSON,
/// a bad target): the C API reports it as KILN_DB_INVALID_ARGUMENT.
class DbInvalidArgument : public DbError {
 public:
  using DbError::DbError;
};

}  // namespace kiln::db
