/*
 * kiln_db.h - the C interface to a Kiln tuning database.
 *
 * Compilers look up the fastest schedule (trace) Kiln measured for a workload
 * on a target. Plain C99; every function is safe to call from C or C++ and
 * never lets a C++ exception escape. Link with -lkiln_db.
 *
 * Stability: functions marked "since: 1.0" keep their signature and meaning
 * for every 1.x release. New functions and new kiln_db_record fields may be
 * added in minor releases; fields are only ever appended, and records are
 * allocated by the library, so older callers stay correct.
 *
 * Threads: a kiln_db handle may be used by one thread at a time. Open one
 * handle per thread; any number of handles and processes may share a file.
 */
#ifndef KILN_DB_H
#define KILN_DB_H

#ifdef __cplusplus
extern "C" {
#endif

/* The API version this header declares. */
#define KILN_DB_API_VERSION_MAJOR 1
#define KILN_DB_API_VERSION_MINOR 2
#define KILN_DB_API_VERSION_PATCH 0
#define KILN_DB_API_VERSION \
  (KILN_DB_API_VERSION_MAJOR * 10000 + KILN_DB_API_VERSION_MINOR * 100 + KILN_DB_API_VERSION_PATCH)
/* True when this header provides at least API version major.minor.patch. */
#define KILN_DB_API_VERSION_AT_LEAST(major, minor, patch) \
  (KILN_DB_API_VERSION >= ((major)*10000 + (minor)*100 + (patch)))

#if defined(_WIN32)
#define KILN_DB_API
#else
#define KILN_DB_API __attribute__((visibility("default")))
#endif

/* Result of every fallible call. */
typedef enum kiln_db_status {
  KILN_DB_OK = 0,               /* success */
  KILN_DB_NOT_FOUND = 1,        /* the lookup found no successful record */
  KILN_DB_INVALID_ARGUMENT = 2, /* a NULL or malformed argument; see kiln_db_last_error */
  KILN_DB_ERROR = 3             /* the file could not be opened or read; see kiln_db_last_error */
} kiln_db_status;

/* Flags for kiln_db_open; exactly one of them. */
#define KILN_DB_OPEN_READ_ONLY 0x1u  /* the file must exist at the current schema */
#define KILN_DB_OPEN_READ_WRITE 0x2u /* the file must exist; an older schema is upgraded */
#define KILN_DB_OPEN_CREATE 0x4u     /* read-write, creating an empty database if missing */

/* An open database. Opaque. Release with kiln_db_close. */
typedef struct kiln_db_s *kiln_db;

/* The best record of a lookup. Owned by the kiln_db handle that returned it:
 * valid until the next kiln_db_best on that handle or kiln_db_close; never
 * free it. Copy what you need to keep. */
typedef struct kiln_db_record {
  const char *trace_json;         /* the schedule trace, JSON, NUL-terminated */
  double mean_latency_s;          /* mean over the measured repeats, in seconds */
  const char *target;             /* canonical target the record was measured on */
  int exact_target;               /* 1: measured on the requested target; 0: a fallback
                                     of the same device kind (another CPU model or
                                     GPU architecture) */
  const char *workload_hash;      /* sha256 hex of the workload's canonical JSON */
  double confirmed_latency_s;     /* since 1.1: the median of the re-timings that
                                     confirmed this program at the end of its tuning
                                     run, in seconds; 0 when it was never confirmed.
                                     Confirmed records rank before unconfirmed ones. */
  const char *packed_inputs_json; /* since 1.2: the constant inputs (weights) the
                                 program reads in a layout packed ahead of time, as
                                 JSON: [{"input": i, "shape": [...]}, ...]; "[]" when
                                 none. Build the trace with Kiln's code generation and
                                 call the artifact's kiln_prepack once per weight
                                 (codegen/runtime/abi.h); the shapes let you check it. */
} kiln_db_record;

/* Opens (or creates, with KILN_DB_OPEN_CREATE) the database at `path`.
 * On success sets *out_db and returns KILN_DB_OK. On failure it still sets
 * *out_db to a handle that only holds the error (NULL if memory ran out):
 * read the message with kiln_db_last_error, then release it with
 * kiln_db_close.
 * since: 1.0 */
KILN_DB_API kiln_db_status kiln_db_open(const char *path, unsigned flags, kiln_db *out_db);

/* Looks up the fastest successful record of a workload on a target: the
 * lowest confirmed latency when a record is confirmed, else the lowest mean.
 * `workload` is either the 64-hex-digit workload key hash or the canonical
 * workload JSON itself (anything starting with '{'), which is then hashed.
 * `target` is a Kiln target string in any flag order, e.g.
 * "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=8".
 * Records of the exact target come first; when it has none, the best record
 * of the same device model, then of the same device kind, is returned with
 * exact_target = 0 (the same vector width ranks before the rest of the kind).
 * Error records are never returned. A target of -mcpu=native means the CPU of
 * the machine calling.
 * Returns KILN_DB_OK and sets *out_record, or KILN_DB_NOT_FOUND and sets
 * *out_record to NULL. A workload that is neither 64 lowercase hex digits nor
 * JSON, or a target that does not parse, is KILN_DB_INVALID_ARGUMENT.
 * since: 1.0 */
KILN_DB_API kiln_db_status kiln_db_best(kiln_db db, const char *workload, const char *target,
                                        const kiln_db_record **out_record);

/* The message of the last failed call on `db`, or "" if the last call
 * succeeded. Owned by `db`: valid until the next call on it; never free it.
 * For db == NULL, returns a message saying so.
 * since: 1.0 */
KILN_DB_API const char *kiln_db_last_error(kiln_db db);

/* Closes the database and frees every record it returned. NULL-safe: accepts
 * NULL and a pointer to a NULL handle. Sets *db to NULL.
 * since: 1.0 */
KILN_DB_API void kiln_db_close(kiln_db *db);

/* The library's version, e.g. "0.1.0". Compare with KILN_DB_API_VERSION to
 * detect a header/library mismatch. Static string; never free it.
 * since: 1.0 */
KILN_DB_API const char *kiln_db_library_version(void);

/* The API version the library implements, as KILN_DB_API_VERSION encodes it.
 * since: 1.0 */
KILN_DB_API int kiln_db_library_api_version(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_DB_H */
