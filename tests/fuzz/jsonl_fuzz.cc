// JSON Lines records (kiln db import): any line is refused with a DbError naming the
// problem, or reads as a record that writes back to a line reading the same.
#include <stdexcept>

#include "database/error.h"
#include "database/jsonl.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(jsonl_line) {
  kiln::db::Record record;
  try {
    record = kiln::db::record_from_jsonl(input);
  } catch (const kiln::db::DbError &) {
    return;
  }
  std::string line = kiln::db::record_to_jsonl(record);
  if (kiln::db::record_to_jsonl(kiln::db::record_from_jsonl(line)) != line) {
    throw std::logic_error("a record does not survive writing and reading back");
  }
}
