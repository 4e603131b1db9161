// The on-disk schema: its version, the SQL that creates it, and migrations.
// Private to the database folder.

#pragma once

#include <string>
#include <string_view>

namespace kiln::db {

namespace sqlite {
class Connection;
}

/// The schema version this build writes and understands.
inline constexpr int kSchemaVersion = 4;

/// The frozen SQL of schema version 1 (identical to database/schema/v1.sql).
std::string_view schema_v1_sql();

/// Reads the schema version of an open file: 0 for an empty file (no tables).
/// Throws DbError when the file is not SQLite, is damaged, is an SQLite file
/// without Kiln's tables, or has a version newer than kSchemaVersion.
int read_schema_version(sqlite::Connection &conn, const std::string &path);

/// Brings the schema from `from` (0 = empty file) to kSchemaVersion. Must run
/// inside a write transaction, so that a concurrent opener either sees the
/// old schema and waits, or the new one and skips.
void migrate(sqlite::Connection &conn, int from);

}  // namespace kiln::db
