/* Checks the executor's C API from C: load a compiled model, describe its
 * tensors, set the input, run twice, compare the output with the exporter's
 * reference, and the errors (bad folder, wrong size, index out of range, NULL).
 * usage: kiln_model_capi_run MODEL_DIR INPUT.bin REFERENCE.bin */

#include "kiln_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/c_check.h"

/* Reads a whole file; *size gets its length. NULL when it cannot be read. */
static void *read_file(const char *path, size_t *size) {
  FILE *file = fopen(path, "rb");
  void *data = NULL;
  long length = 0;
  if (!file) return NULL;
  if (fseek(file, 0, SEEK_END) == 0 && (length = ftell(file)) > 0 && fseek(file, 0, SEEK_SET) == 0) {
    data = malloc((size_t)length);
    if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
      free(data);
      data = NULL;
    }
  }
  fclose(file);
  *size = (size_t)length;
  return data;
}

/* ||a - b|| / ||b|| over n floats. */
static double relative_error(const float *a, const float *b, size_t n) {
  double diff = 0, norm = 0;
  size_t i;
  for (i = 0; i < n; ++i) {
    diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    norm += (double)b[i] * b[i];
  }
  return sqrt(diff) / (norm > 0 ? sqrt(norm) : 1.0);
}

int main(int argc, char **argv) {
  kiln_model model = NULL, bad = NULL;
  kiln_model_tensor_info in_info, out_info;
  size_t input_bytes = 0, ref_bytes = 0, out_bytes = 0;
  const void *out = NULL;
  void *input = NULL, *ref = NULL;
  int round;

  if (argc != 4) {
    fprintf(stderr, "usage: %s MODEL_DIR INPUT.bin REFERENCE.bin\n", argv[0]);
    return 2;
  }
  CHECK(kiln_model_library_api_version() == KILN_MODEL_API_VERSION);
  input = read_file(argv[2], &input_bytes);
  ref = read_file(argv[3], &ref_bytes);
  if (!input || !ref) {
    fprintf(stderr, "cannot read %s or %s\n", argv[2], argv[3]);
    return 2;
  }

  if (kiln_model_load(argv[1], &model) != KILN_MODEL_OK) {
    fprintf(stderr, "kiln_model_load: %s\n", kiln_model_last_error(model));
    return 1;
  }
  CHECK(kiln_model_num_inputs(model) == 1);
  CHECK(kiln_model_num_outputs(model) == 1);
  CHECK(kiln_model_input_info(model, 0, &in_info) == KILN_MODEL_OK);
  CHECK(strcmp(in_info.dtype, "float32") == 0);
  CHECK(in_info.rank >= 1 && in_info.shape[0] == 1);
  CHECK(in_info.bytes == input_bytes);
  CHECK(kiln_model_output_info(model, 0, &out_info) == KILN_MODEL_OK);
  CHECK(out_info.bytes == ref_bytes);
  CHECK(strlen(out_info.name) > 0);
  CHECK(kiln_model_set_threads(2) == KILN_MODEL_OK);

  for (round = 0; round < 2; ++round) {
    CHECK(kiln_model_set_input(model, 0, input, input_bytes) == KILN_MODEL_OK);
    CHECK(kiln_model_run(model) == KILN_MODEL_OK);
    CHECK(kiln_model_get_output(model, 0, &out, &out_bytes) == KILN_MODEL_OK);
    CHECK(out != NULL && out_bytes == ref_bytes);
    if (out && out_bytes == ref_bytes) {
      double error = relative_error((const float *)out, (const float *)ref, ref_bytes / sizeof(float));
      printf("round %d: relative L2 error %.3g\n", round, error);
      CHECK(error <= 1e-4);
    }
  }

  /* Errors: each a status and a message, the handle stays usable. */
  CHECK(kiln_model_set_input(model, 0, input, input_bytes - 4) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(strstr(kiln_model_last_error(model), "bytes") != NULL);
  CHECK(kiln_model_set_input(model, 1, input, input_bytes) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(strstr(kiln_model_last_error(model), "input 1 does not exist") != NULL);
  CHECK(kiln_model_set_input(model, 0, NULL, input_bytes) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(kiln_model_output_info(model, 3, &out_info) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(kiln_model_get_output(model, 0, NULL, &out_bytes) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(kiln_model_run(model) == KILN_MODEL_OK);
  CHECK(strcmp(kiln_model_last_error(model), "") == 0);
  CHECK(kiln_model_set_threads(0) == KILN_MODEL_INVALID_ARGUMENT);

  CHECK(kiln_model_load(argv[2], &bad) == KILN_MODEL_ERROR); /* a file, not a compiled model */
  CHECK(bad != NULL && strstr(kiln_model_last_error(bad), "not a compiled model") != NULL);
  CHECK(kiln_model_run(bad) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(kiln_model_num_inputs(bad) == 0);
  kiln_model_free(&bad);
  CHECK(bad == NULL);
  CHECK(kiln_model_run(NULL) == KILN_MODEL_INVALID_ARGUMENT);
  CHECK(strlen(kiln_model_last_error(NULL)) > 0);
  CHECK(kiln_model_load(argv[1], NULL) == KILN_MODEL_INVALID_ARGUMENT);

  kiln_model_free(&model);
  CHECK(model == NULL);
  kiln_model_free(&model); /* NULL-safe */
  kiln_model_free(NULL);
  free(input);
  free(ref);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
