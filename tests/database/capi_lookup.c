/* Checks the C API from C: open, best (by hash and by canonical JSON,
 * exact and fallback, not found), errors, NULL-safety, versions, and that
 * a read-only handle leaves the file alone.
 * Reads the database written by tools/capi_fixture.cc.
 * usage: kiln_db_capi_lookup DB */

#include "kiln_db.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/common/c_check.h"

#if !KILN_DB_API_VERSION_AT_LEAST(1, 1, 0)
#error "this test needs kiln_db API 1.1"
#endif

static const char *kWorkloadJson = "{\"ops\":[{\"op\":\"dense\",\"shape\":[128,256,512]}],\"version\":1}";
/* Canonical form: flags sorted by name. */
static const char *kSkylake = "llvm -mcpu=skylake -mtriple=x86_64-linux-gnu -num-cores=4";

/* Whether PATH followed by SUFFIX names an existing file. */
static int file_exists(const char *path, const char *suffix) {
  char name[4096];
  FILE *file = NULL;
  if (snprintf(name, sizeof name, "%s%s", path, suffix) >= (int)sizeof name) return 0;
  file = fopen(name, "rb");
  if (file) fclose(file);
  return file != NULL;
}

int main(int argc, char **argv) {
  kiln_db db = NULL;
  const kiln_db_record *record = NULL;
  char hash[65];
  kiln_db bad = NULL;

  if (argc != 2) {
    fprintf(stderr, "usage: %s DB\n", argv[0]);
    return 2;
  }
  CHECK(kiln_db_library_api_version() == KILN_DB_API_VERSION);
  CHECK(strlen(kiln_db_library_version()) > 0);

  CHECK(kiln_db_open(argv[1], KILN_DB_OPEN_READ_ONLY, &db) == KILN_DB_OK);
  CHECK(db != NULL);
  CHECK(strcmp(kiln_db_last_error(db), "") == 0);

  /* By canonical JSON, flags in another order: the exact target's best. */
  CHECK(kiln_db_best(db, kWorkloadJson, "llvm -num-cores=4 -mcpu=skylake -mtriple=x86_64-linux-gnu", &record) ==
        KILN_DB_OK);
  if (record) {
    CHECK(strcmp(record->trace_json, "{\"tile\":[8,32]}") == 0);
    CHECK(fabs(record->mean_latency_s - 2.5e-4) < 1e-12);
    CHECK(record->confirmed_latency_s == 0); /* never confirmed */
    CHECK(strcmp(record->packed_inputs_json, "[]") == 0);
    CHECK(strcmp(record->target, kSkylake) == 0);
    CHECK(record->exact_target == 1);
    CHECK(strlen(record->workload_hash) == 64);
    memcpy(hash, record->workload_hash, 65);

    /* By hash: the same record. */
    CHECK(kiln_db_best(db, hash, kSkylake, &record) == KILN_DB_OK);
    CHECK(record && strcmp(record->trace_json, "{\"tile\":[8,32]}") == 0);
  }

  /* A confirmed record ranks before a faster-measured unconfirmed one (API 1.1). */
  CHECK(kiln_db_best(db, "{\"ops\":[{\"op\":\"dense\",\"shape\":[64,64,64]}],\"version\":1}", kSkylake, &record) ==
        KILN_DB_OK);
  CHECK(record && strcmp(record->trace_json, "{\"tile\":[4,4]}") == 0);
  CHECK(record && fabs(record->confirmed_latency_s - 1.5e-4) < 1e-12 && fabs(record->mean_latency_s - 2e-4) < 1e-12);
  /* Its weights packed ahead of time, as the record says (API 1.2). */
  CHECK(record && strcmp(record->packed_inputs_json, "[{\"input\":1,\"shape\":[4,64,16]}]") == 0);

  /* Another x86 model: fallback to skylake, flagged as such. */
  CHECK(kiln_db_best(db, kWorkloadJson, "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -num-cores=4", &record) ==
        KILN_DB_OK);
  CHECK(record && record->exact_target == 0 && strcmp(record->trace_json, "{\"tile\":[8,32]}") == 0);

  /* AArch64 never falls back to x86. */
  CHECK(kiln_db_best(db, kWorkloadJson, "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1", &record) == KILN_DB_OK);
  CHECK(record && strcmp(record->trace_json, "{\"tile\":[2,8]}") == 0 && record->exact_target == 0);

  /* Nothing for CUDA, nothing for an unknown workload. */
  CHECK(kiln_db_best(db, kWorkloadJson, "cuda -arch=sm_90", &record) == KILN_DB_NOT_FOUND);
  CHECK(record == NULL);
  CHECK(kiln_db_best(db, "{\"ops\":[]}", kSkylake, &record) == KILN_DB_NOT_FOUND);

  /* Bad input: a status and a message, never a crash. */
  CHECK(kiln_db_best(db, kWorkloadJson, "tpu -v=5", &record) == KILN_DB_INVALID_ARGUMENT);
  CHECK(strstr(kiln_db_last_error(db), "unknown target kind 'tpu'") != NULL);
  /* A malformed hash or workload JSON is an argument error, not "not found". */
  CHECK(kiln_db_best(db, "abc123", kSkylake, &record) == KILN_DB_INVALID_ARGUMENT);
  CHECK(strstr(kiln_db_last_error(db), "bad workload 'abc123': expected a key hash") != NULL);
  CHECK(kiln_db_best(db, "{bad json", kSkylake, &record) == KILN_DB_INVALID_ARGUMENT);
  CHECK(strstr(kiln_db_last_error(db), "not valid JSON") != NULL);
  CHECK(kiln_db_best(db, NULL, kSkylake, &record) == KILN_DB_INVALID_ARGUMENT);
  CHECK(kiln_db_best(NULL, kWorkloadJson, kSkylake, &record) == KILN_DB_INVALID_ARGUMENT);
  CHECK(strlen(kiln_db_last_error(NULL)) > 0);

  /* A read-only handle writes nothing, not even the -wal and -shm files SQLite
   * would make beside a WAL-mode file: its folder may not be writable. */
  CHECK(!file_exists(argv[1], "-wal"));
  CHECK(!file_exists(argv[1], "-shm"));

  kiln_db_close(&db);
  CHECK(db == NULL);
  kiln_db_close(&db); /* NULL-safe */
  kiln_db_close(NULL);

  /* A failed open still yields a handle holding the message. */
  CHECK(kiln_db_open("/nonexistent/dir/x.kdb", KILN_DB_OPEN_READ_ONLY, &bad) == KILN_DB_ERROR);
  CHECK(bad != NULL && strstr(kiln_db_last_error(bad), "does not exist") != NULL);
  kiln_db_close(&bad);
  CHECK(kiln_db_open(argv[1], KILN_DB_OPEN_READ_ONLY | KILN_DB_OPEN_CREATE, &bad) == KILN_DB_INVALID_ARGUMENT);
  kiln_db_close(&bad);

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("capi_lookup: all checks passed\n");
  return 0;
}
