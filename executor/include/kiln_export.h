/*
 * kiln_export.h - tuned kernels for other compilers to link.
 *
 * A compiler that looks a workload up at compile time (kiln_db.h) gets a trace, which
 * only Kiln's code generation can build. kiln_export_kernel does that build: it takes
 * the best record of a workload for a CPU target from a database and writes a
 * relocatable object (link it into your program) and a C header declaring the kernel,
 * its parameters (order, dtypes, shapes, alignment), its prepack function for weights
 * read packed, and the runtime functions it calls. `kiln export` is the same on the
 * command line. Plain C99; no C++ exception escapes. Link with -lkiln_export; the
 * exported kernel itself needs only libkiln_runtime (or your own definitions of its
 * four functions) and libm.
 *
 * Stability: functions marked "since: 1.0" keep their signature and meaning for every
 * 1.x release.
 */
#ifndef KILN_EXPORT_H
#define KILN_EXPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_EXPORT_API_VERSION_MAJOR 1
#define KILN_EXPORT_API_VERSION_MINOR 0

#if defined(_WIN32)
#define KILN_EXPORT_API
#else
#define KILN_EXPORT_API __attribute__((visibility("default")))
#endif

typedef enum kiln_export_status {
  KILN_EXPORT_OK = 0,
  KILN_EXPORT_NOT_FOUND = 1,        /* no record of the workload for the target (or its CPU kind) */
  KILN_EXPORT_INVALID_ARGUMENT = 2, /* a NULL or malformed argument: workload, target, symbol */
  KILN_EXPORT_ERROR = 3             /* the database could not be read, no record builds, a file
                                       could not be written */
} kiln_export_status;

/* Builds the best record of `workload` (the 64-hex-digit workload key hash or the
 * workload's JSON) for `target` (e.g. "llvm -mcpu=znver4 -mtriple=x86_64-linux-gnu
 * -num-cores=8"; -mcpu=native is the calling machine's CPU) in the database at
 * `db_path`, and writes the object to `object_path` and the header to `header_path`.
 * The kernel is named `symbol` (a C identifier; NULL or "" for kiln_ and its
 * operators), its helpers `symbol`_prepack, `symbol`_run and `symbol`_info. On failure
 * the message is written to `error` (up to `error_bytes`, NUL-terminated; it may be
 * NULL) and nothing is left at the two paths.
 * since: 1.0 */
KILN_EXPORT_API kiln_export_status kiln_export_kernel(const char *db_path, const char *workload, const char *target,
                                                      const char *symbol, const char *object_path,
                                                      const char *header_path, char *error, size_t error_bytes);

#ifdef __cplusplus
}
#endif

#endif /* KILN_EXPORT_H */
