// The C API's lookup arguments (kiln_db_best from another compiler): any workload and
// target text, split from the input at its first newline, gives a status from the
// documented set, and a record only with every field set.
#include <filesystem>
#include <stdexcept>
#include <string>

#include "database/database.h"
#include "database/include/kiln_db.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

// A database with one record, made once per process.
kiln_db fuzz_database() {
  static kiln_db db = [] {
    std::filesystem::path path = std::filesystem::temp_directory_path() / "kiln-fuzz-capi.kilndb";
    std::filesystem::remove(path);
    {
      auto writer = kiln::db::Database::open(path, kiln::db::OpenMode::kCreate);
      kiln::db::Record record;
      record.workload.canonical_json = R"({"ops":[{"op":"dense","shape":[128,256,512]}],"version":1})";
      record.target = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=4";
      record.trace_json = R"({"instructions":[],"version":1})";
      record.outcome = std::vector<double>{2.0e-4};
      writer.commit({record});
    }
    kiln_db handle = nullptr;
    if (kiln_db_open(path.c_str(), KILN_DB_OPEN_READ_ONLY, &handle) != KILN_DB_OK) {
      throw std::runtime_error("cannot open the fuzz database");
    }
    return handle;
  }();
  return db;
}

}  // namespace

KILN_FUZZ_TARGET(capi_lookup) {
  size_t newline = input.find('\n');
  std::string workload = input.substr(0, newline);
  std::string target = newline == std::string::npos ? "" : input.substr(newline + 1);
  const kiln_db_record *record = nullptr;
  kiln_db_status status = kiln_db_best(fuzz_database(), workload.c_str(), target.c_str(), &record);
  if (status == KILN_DB_OK) {
    if (!record || !record->trace_json || !record->target || !record->workload_hash) {
      throw std::logic_error("kiln_db_best returned a record with an unset field");
    }
  } else if (status != KILN_DB_NOT_FOUND && status != KILN_DB_INVALID_ARGUMENT && status != KILN_DB_ERROR) {
    throw std::logic_error("kiln_db_best returned an undocumented status " + std::to_string(status));
  } else if (!kiln_db_last_error(fuzz_database())) {
    throw std::logic_error("a failed lookup left no error message");
  }
}
