/* Runs a compiled model through the C API on an exported fixture's .npy files and
 * compares every output: input NAME is read from PREFIX.in.NAME.npy and output NAME
 * compared (float32, relative L2 error at most 1e-4) with PREFIX.out.NAME.npy, the
 * names being the ones the model reports. A model with dynamic dimensions takes each
 * input in the file's shape (kiln_model_set_input_shaped), its outputs' shapes are
 * checked against the reference files', and a value past a dimension's range must be
 * refused with a message naming it. The .npy files hold exactly the tensor's
 * bytes after their header (version 1.0 or 2.0, little-endian, C order), as
 * tests/frontend/models/export_torch_models.py writes them.
 * usage: kiln_model_capi_run_npy MODEL_DIR PREFIX */

#include "kiln_model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/c_check.h"

/* The shape in a .npy header ("'shape': (1, 16), "): its rank, or -1. */
static int npy_shape(const char *path, int64_t *shape, int max_rank) {
  FILE *f = fopen(path, "rb");
  char head[512];
  size_t got = 0;
  const char *p = NULL;
  int rank = 0;
  if (!f) return -1;
  got = fread(head, 1, sizeof head - 1, f);
  fclose(f);
  head[got] = 0;
  p = strstr(head + 10, "'shape': (");
  if (!p) return -1;
  p += strlen("'shape': (");
  while (*p && *p != ')' && rank < max_rank) {
    char *end = NULL;
    long long v = strtoll(p, &end, 10);
    if (end == p) break;
    shape[rank++] = (int64_t)v;
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  return rank;
}

/* The data of a .npy file of exactly `bytes` bytes; NULL (with a message) otherwise. */
static unsigned char *read_npy(const char *path, size_t bytes) {
  FILE *f = fopen(path, "rb");
  unsigned char head[12];
  size_t header = 0;
  long size = 0;
  unsigned char *data = NULL;
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  if (fread(head, 1, sizeof head, f) != sizeof head || memcmp(head, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "%s is not a .npy file\n", path);
    fclose(f);
    return NULL;
  }
  header = head[6] == 1 ? 10 + (size_t)(head[8] | head[9] << 8)
                        : 12 + (size_t)(head[8] | head[9] << 8 | head[10] << 16 | (size_t)head[11] << 24);
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  if (size < 0 || (size_t)size != header + bytes) {
    fprintf(stderr, "%s holds %ld bytes after its header, the model wants %zu\n", path, size - (long)header, bytes);
    fclose(f);
    return NULL;
  }
  data = malloc(bytes ? bytes : 1);
  fseek(f, (long)header, SEEK_SET);
  if (data && fread(data, 1, bytes, f) != bytes) {
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

int main(int argc, char **argv) {
  kiln_model model = NULL;
  kiln_model_tensor_info info;
  char path[4096];
  size_t i, k, n_in, n_out, bytes = 0;
  int dynamic = 0;
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL_DIR PREFIX\n", argv[0]);
    return 2;
  }
  if (kiln_model_load(argv[1], &model) != KILN_MODEL_OK) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], kiln_model_last_error(model));
    kiln_model_free(&model);
    return 1;
  }
  n_in = kiln_model_num_inputs(model);
  n_out = kiln_model_num_outputs(model);
  CHECK(n_in > 0 && n_out > 0);
  dynamic = kiln_model_num_dims(model) > 0;
  for (i = 0; i < n_in; ++i) {
    unsigned char *data = NULL;
    int64_t shape[8];
    int rank = 0, d = 0;
    size_t in_bytes = 0;
    CHECK(kiln_model_input_info(model, i, &info) == KILN_MODEL_OK);
    snprintf(path, sizeof path, "%s.in.%s.npy", argv[2], info.name);
    if (!dynamic) {
      data = read_npy(path, info.bytes);
      CHECK(data != NULL);
      if (data) CHECK(kiln_model_set_input(model, i, data, info.bytes) == KILN_MODEL_OK);
      free(data);
      continue;
    }
    /* Dynamic: 0 bytes and -1 at the dynamic axes until a shape is given. */
    CHECK(info.bytes == 0);
    rank = npy_shape(path, shape, 8);
    CHECK(rank == info.rank);
    in_bytes = strcmp(info.dtype, "int64") == 0 ? 8 : 4;
    for (d = 0; d < rank; ++d) {
      CHECK(info.shape[d] == -1 || info.shape[d] == shape[d]);
      in_bytes *= (size_t)shape[d];
    }
    CHECK(kiln_model_set_input(model, i, "", 0) == KILN_MODEL_INVALID_ARGUMENT);
    data = read_npy(path, in_bytes);
    CHECK(data != NULL);
    if (data) CHECK(kiln_model_set_input_shaped(model, i, data, rank, shape, in_bytes) == KILN_MODEL_OK);
    free(data);
  }
  CHECK(kiln_model_run(model) == KILN_MODEL_OK);
  for (i = 0; i < n_out; ++i) {
    const float *got = NULL;
    float *want = NULL;
    double error = 0, norm = 0;
    CHECK(kiln_model_output_info(model, i, &info) == KILN_MODEL_OK);
    CHECK(strcmp(info.dtype, "float32") == 0);
    CHECK(kiln_model_get_output(model, i, (const void **)&got, &bytes) == KILN_MODEL_OK);
    snprintf(path, sizeof path, "%s.out.%s.npy", argv[2], info.name);
    if (dynamic) {
      int64_t shape[8];
      const int64_t *actual = NULL;
      int rank = npy_shape(path, shape, 8), actual_rank = 0, d = 0;
      CHECK(kiln_model_output_shape(model, i, &actual_rank, &actual) == KILN_MODEL_OK);
      CHECK(actual_rank == rank);
      for (d = 0; d < rank && d < actual_rank; ++d) CHECK(actual[d] == shape[d]);
    } else {
      CHECK(bytes == info.bytes);
    }
    want = (float *)read_npy(path, bytes);
    CHECK(want != NULL);
    if (!want || !got) continue;
    for (k = 0; k < bytes / sizeof(float); ++k) {
      error += ((double)got[k] - want[k]) * ((double)got[k] - want[k]);
      norm += (double)want[k] * want[k];
    }
    printf("output '%s': relative L2 error %.3g\n", info.name, sqrt(error / (norm > 0 ? norm : 1)));
    CHECK(sqrt(error / (norm > 0 ? norm : 1)) <= 1e-4);
    free(want);
  }
  if (dynamic) {
    /* Every dynamic axis one past the (one) dimension's range: refused by name. */
    const char *name = NULL;
    int64_t lo = 0, hi = 0, shape[8];
    int rank = 0, d = 0;
    CHECK(kiln_model_num_dims(model) == 1);
    CHECK(kiln_model_dim_info(model, 0, &name, &lo, &hi) == KILN_MODEL_OK);
    for (i = 0; i < n_in; ++i) {
      size_t elements = 1, element_bytes = 0;
      unsigned char *zeros = NULL;
      CHECK(kiln_model_input_info(model, i, &info) == KILN_MODEL_OK);
      element_bytes = strcmp(info.dtype, "int64") == 0 ? 8 : 4;
      rank = info.rank;
      for (d = 0; d < rank; ++d) {
        shape[d] = info.shape[d] == -1 ? hi + 1 : info.shape[d];
        elements *= (size_t)shape[d];
      }
      zeros = calloc(elements, element_bytes);
      CHECK(kiln_model_set_input_shaped(model, i, zeros, rank, shape, elements * element_bytes) == KILN_MODEL_OK);
      free(zeros);
    }
    CHECK(kiln_model_run(model) == KILN_MODEL_ERROR);
    CHECK(strstr(kiln_model_last_error(model), "outside the range") != NULL);
    CHECK(strstr(kiln_model_last_error(model), name) != NULL);
    printf("past the range: %s\n", kiln_model_last_error(model));
  }
  kiln_model_free(&model);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  return 0;
}
