/* Links a dense kernel exported by `kiln export --name kiln_test_dense` (64x128 inputs,
 * 96x128 weights, the weights constant) and compares it with a plain loop. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kiln_test_dense.h"

enum { M = 64, N = 96, K = 128 };

static float *aligned_floats(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, n * sizeof(float)) != 0) return NULL;
  return (float *)p;
}

int main(void) {
  float *x = aligned_floats(M * K), *w = aligned_floats(N * K), *y = aligned_floats(M * N);
  float *want = aligned_floats(M * N);
  if (!x || !w || !y || !want) return 2;
  unsigned seed = 7;
  for (int i = 0; i < M * K; ++i) x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
  for (int i = 0; i < N * K; ++i) w[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 1023) / 512.0f - 1.0f;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += (double)x[i * K + k] * w[j * K + k];
      want[i * N + j] = (float)s;
    }
  if (KILN_TEST_DENSE_NUM_PARAMS != 3 || KILN_TEST_DENSE_PARAM2_ELEMENTS != M * N) {
    fprintf(stderr, "unexpected parameters in the header\n");
    return 1;
  }
#if KILN_TEST_DENSE_HAS_PREPACK
  float *packed = aligned_floats(KILN_TEST_DENSE_PARAM1_ELEMENTS);
  if (!packed) return 2;
  if (kiln_test_dense_prepack_run(w, packed) != 0) {
    fprintf(stderr, "prepack failed\n");
    return 1;
  }
  int32_t status = kiln_test_dense_run(x, packed, y);
  printf("packed weights: %d floats\n", KILN_TEST_DENSE_PARAM1_ELEMENTS);
#else
  int32_t status = kiln_test_dense_run(x, w, y);
#endif
  if (status != 0) {
    fprintf(stderr, "the kernel returned %d\n", status);
    return 1;
  }
  double err = 0, norm = 0;
  for (int i = 0; i < M * N; ++i) {
    err += (double)(y[i] - want[i]) * (y[i] - want[i]);
    norm += (double)want[i] * want[i];
  }
  double rel = sqrt(err / norm);
  printf("relative L2 error %.3g\n", rel);
  if (!(rel < 1e-5)) return 1;
  printf("%s\n", kiln_test_dense_info);
  return 0;
}
