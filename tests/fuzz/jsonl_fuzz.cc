// JSON Lines records (kiln db import): any line is refused with a DbError naming the
// problem, or reads as a record that writes back to a line reading the same. A record's
// pipeline options (what `kiln compile` reads back from the database) are refused with
// std::invalid_argument, or read as options that write back to the same options.
#include <stdexcept>

#include "database/error.h"
#include "database/jsonl.h"
#include "frontend/pipeline.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(jsonl_line) {
  kiln::db::Record record;
  try {
    record = kiln::db::record_from_jsonl(input);
  } catch (const kiln::db::DbError &) {
    return;
  }
  if (!record.metadata.pipeline.is_null()) {
    try {
      auto options = kiln::frontend::PipelineOptions::from_json(record.metadata.pipeline);
      if (!(kiln::frontend::PipelineOptions::from_json(options.to_json()) == options)) {
        throw std::logic_error("pipeline options do not survive writing and reading back");
      }
    } catch (const std::invalid_argument &) {
    }
  }
  std::string line = kiln::db::record_to_jsonl(record);
  if (kiln::db::record_to_jsonl(kiln::db::record_from_jsonl(line)) != line) {
    throw std::logic_error("a record does not survive writing and reading back");
  }
}
