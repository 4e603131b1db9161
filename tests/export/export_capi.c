/* kiln_export.h from C: exports a workload's best record, and refuses bad requests with
 * the right status and a message. Usage: kiln_export_capi DB WORKLOAD_KEY OUT_DIR */
#include <stdio.h>
#include <string.h>

#include "kiln_export.h"

static int expect(kiln_export_status got, kiln_export_status want, const char *error, const char *what) {
  if (got != want || (want != KILN_EXPORT_OK && error[0] == '\0')) {
    fprintf(stderr, "%s: status %d, expected %d (%s)\n", what, (int)got, (int)want, error);
    return 1;
  }
  printf("%s: %s\n", what, want == KILN_EXPORT_OK ? "ok" : error);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  char object[4096], header[4096], error[1024];
  snprintf(object, sizeof object, "%s/kiln_test_dense.o", argv[3]);
  snprintf(header, sizeof header, "%s/kiln_test_dense.h", argv[3]);
  int failures = 0;
  failures += expect(
      kiln_export_kernel(argv[1], argv[2], "llvm -mcpu=native", "kiln_test_dense", object, header, error, sizeof error),
      KILN_EXPORT_OK, error, "export");
  failures += expect(kiln_export_kernel(argv[1], "0000000000000000000000000000000000000000000000000000000000000000",
                                        "llvm -mcpu=native", NULL, object, header, error, sizeof error),
                     KILN_EXPORT_NOT_FOUND, error, "unknown workload");
  failures += expect(
      kiln_export_kernel(argv[1], argv[2], "llvm -mcpu=native", "not a name", object, header, error, sizeof error),
      KILN_EXPORT_INVALID_ARGUMENT, error, "bad symbol");
  failures +=
      expect(kiln_export_kernel(argv[1], "dense", "llvm -mcpu=native", NULL, object, header, error, sizeof error),
             KILN_EXPORT_INVALID_ARGUMENT, error, "bad workload");
  failures += expect(kiln_export_kernel("/nonexistent/kiln.db", argv[2], "llvm -mcpu=native", NULL, object, header,
                                        error, sizeof error),
                     KILN_EXPORT_ERROR, error, "missing database");
  failures += expect(kiln_export_kernel(NULL, argv[2], "llvm", NULL, object, header, error, sizeof error),
                     KILN_EXPORT_INVALID_ARGUMENT, error, "NULL database");
  return failures == 0 ? 0 : 1;
}
