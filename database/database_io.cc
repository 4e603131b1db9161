// Export to and import from JSON Lines.

#include "database/database.h"

#include "database/database_impl.h"
#include "database/jsonl.h"

#include <istream>
#include <ostream>

namespace kiln::db {

size_t Database::export_jsonl(std::ostream &out, std::vector<std::string> *passed_over) {
  impl_->reopen_if_changed();
  // One read transaction, so the export is a consistent snapshot even while
  // tuning jobs keep committing.
  return with_lock_retry(impl_->path, [&] {
    sqlite::Statement s(impl_->conn.get(), "SELECT " + std::string(kRecordColumns) +
                                               " FROM records r JOIN workloads w ON w.id = r.workload_id "
                                               "ORDER BY r.id");
    size_t count = 0;
    if (passed_over) passed_over->clear();
    while (s.step()) {
      Record record;
      try {
        record = read_record(s);
      } catch (const DbError &e) {
        if (!passed_over) throw;
        passed_over->push_back(e.what());
        continue;
      }
      out << record_to_jsonl(record) << '\n';
      ++count;
    }
    if (!out) throw DbError("writing the export of " + impl_->path + " failed");
    return count;
  });
}

CommitResult Database::import_jsonl(std::istream &in, const std::function<void(const Record &)> &check) {
  // Parse and validate every line first: a bad line must leave the file
  // untouched, and its error must name the line, not a record index.
  std::vector<PreparedRecord> prepared;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      Record record = record_from_jsonl(line);
      if (check) check(record);
      prepared.push_back(prepare_record(record, NativeCpu::kKeepAsStored));
    } catch (const std::exception &e) {
      throw DbError("import line " + std::to_string(number) + ": " + e.what() + "; nothing was imported");
    }
  }
  if (in.bad()) throw DbError("reading the import stream failed; nothing was imported");
  CommitResult result;
  impl_->write_transaction([&] { result = impl_->insert_all(prepared); });
  return result;
}

}  // namespace kiln::db
