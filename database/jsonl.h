// The JSON Lines interchange form of a record (one JSON object per line),
// used by export/import to move results between machines. Documented in
// database/README.md; the "format" field versions it.

#pragma once

#include "database/record.h"

#include <string>
#include <string_view>

namespace kiln::db {

/// The value of every line's "format" field.
inline constexpr std::string_view kJsonlFormat = "kiln-record-1";

/// One line, without the newline.
std::string record_to_jsonl(const Record &record);

/// Parses one line. Throws DbError naming the missing or mistyped field, or
/// saying why its "trace" does not read as a Kiln trace (ir::Trace::from_json).
/// Only the shape is checked here; prepare_record checks the values.
Record record_from_jsonl(std::string_view line);

}  // namespace kiln::db
