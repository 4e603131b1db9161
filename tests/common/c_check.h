/* CHECK for the C programs that test Kiln's C APIs: a failed condition prints
 * where and what, counts in `failures`, and the program goes on; main returns
 * non-zero when `failures` is. */
#ifndef KILN_TESTS_COMMON_C_CHECK_H_
#define KILN_TESTS_COMMON_C_CHECK_H_

#include <stdio.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#endif
