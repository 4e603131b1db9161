// The C API: a translation layer from kiln_db.h to kiln::db::Database.
// Every entry point catches everything, so no exception reaches C.

#include "kiln_db.h"

#include <nlohmann/json.hpp>

#include "database/database.h"
#include "database/prepared_record.h"

#include <memory>
#include <new>
#include <optional>
#include <string>

struct kiln_db_s {
  std::optional<kiln::db::Database> database;  // empty when the open failed
  std::string last_error;
  // Storage behind the kiln_db_record handed out by the last kiln_db_best.
  kiln::db::Record best;
  std::string packed_inputs;
  kiln_db_record record{};
};

static kiln_db_status fail(kiln_db db, kiln_db_status status, std::string message) {
  try {
    db->last_error = std::move(message);
  } catch (...) {
    // Out of memory while storing the message: keep the status, lose the text.
  }
  return status;
}

// Runs `body`, turning any exception into a status and the handle's message.
template <class F>
static kiln_db_status guarded(kiln_db db, F &&body) {
  try {
    db->last_error.clear();
    return body();
  } catch (const kiln::db::DbInvalidArgument &e) {
    return fail(db, KILN_DB_INVALID_ARGUMENT, e.what());
  } catch (const kiln::db::DbError &e) {
    return fail(db, KILN_DB_ERROR, e.what());
  } catch (const std::bad_alloc &) {
    return fail(db, KILN_DB_ERROR, "out of memory");
  } catch (const std::exception &e) {
    return fail(db, KILN_DB_ERROR, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(db, KILN_DB_ERROR, "internal error: unknown exception");
  }
}

extern "C" kiln_db_status kiln_db_open(const char *path, unsigned flags, kiln_db *out_db) {
  if (!out_db) return KILN_DB_INVALID_ARGUMENT;
  *out_db = new (std::nothrow) kiln_db_s();
  if (!*out_db) return KILN_DB_ERROR;
  kiln_db db = *out_db;
  if (!path) return fail(db, KILN_DB_INVALID_ARGUMENT, "kiln_db_open: path is NULL");
  kiln::db::OpenMode mode;
  switch (flags) {
    case KILN_DB_OPEN_READ_ONLY:
      mode = kiln::db::OpenMode::kReadOnly;
      break;
    case KILN_DB_OPEN_READ_WRITE:
      mode = kiln::db::OpenMode::kReadWrite;
      break;
    case KILN_DB_OPEN_CREATE:
      mode = kiln::db::OpenMode::kCreate;
      break;
    default:
      return fail(db, KILN_DB_INVALID_ARGUMENT,
                  "kiln_db_open: flags " + std::to_string(flags) +
                      " must be exactly one of KILN_DB_OPEN_READ_ONLY, KILN_DB_OPEN_READ_WRITE, KILN_DB_OPEN_CREATE");
  }
  return guarded(db, [&] {
    db->database.emplace(kiln::db::Database::open(path, mode));
    return KILN_DB_OK;
  });
}

extern "C" kiln_db_status kiln_db_best(kiln_db db, const char *workload, const char *target,
                                       const kiln_db_record **out_record) {
  if (!db) return KILN_DB_INVALID_ARGUMENT;
  if (out_record) *out_record = nullptr;
  if (!workload || !target || !out_record)
    return fail(db, KILN_DB_INVALID_ARGUMENT, "kiln_db_best: workload, target and out_record must not be NULL");
  if (!db->database) return fail(db, KILN_DB_INVALID_ARGUMENT, "kiln_db_best: the database was not opened");
  return guarded(db, [&] {
    std::string hash = kiln::db::workload_hash_from_argument(workload);
    std::optional<kiln::db::Record> best = db->database->best(hash, target);
    if (!best) return fail(db, KILN_DB_NOT_FOUND, "no successful record for workload " + hash + " on '" + target + "'");
    db->best = std::move(*best);
    db->record.trace_json = db->best.trace_json.c_str();
    db->record.mean_latency_s = db->best.mean_latency();
    db->record.target = db->best.target.c_str();
    db->record.exact_target = db->best.target == kiln::db::canonical_target(target) ? 1 : 0;
    db->record.workload_hash = db->best.workload.key_hash.c_str();
    db->record.confirmed_latency_s = db->best.confirmed_latency.value_or(0.0);
    const nlohmann::json &packed = db->best.metadata.packed_inputs;
    db->packed_inputs = packed.is_array() ? packed.dump() : "[]";
    db->record.packed_inputs_json = db->packed_inputs.c_str();
    *out_record = &db->record;
    return KILN_DB_OK;
  });
}

extern "C" const char *kiln_db_last_error(kiln_db db) {
  if (!db) return "kiln_db handle is NULL (kiln_db_open failed for lack of memory, or the handle was closed)";
  return db->last_error.c_str();
}

extern "C" void kiln_db_close(kiln_db *db) {
  if (!db || !*db) return;
  delete *db;  // ~Database never throws: SQLite's close does not fail on a finalized connection
  *db = nullptr;
}

extern "C" const char *kiln_db_library_version(void) { return KILN_VERSION_STRING; }

extern "C" int kiln_db_library_api_version(void) { return KILN_DB_API_VERSION; }
