/* Checks the C API with a model fed token ids: the BERT-style encoder of
 * tests/common/make_token_encoder.cc, compiled. Its three inputs are int64, its two
 * outputs (context, probs3) are found by name; the attention probabilities of each
 * row sum to 1 and are 0 for the masked tokens; a token id outside the vocabulary
 * fails the run with a message naming the input.
 * usage: kiln_model_capi_token_ids MODEL_DIR */

#include "kiln_model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tests/common/c_check.h"

#define TOKENS 8

int main(int argc, char **argv) {
  kiln_model model = NULL;
  kiln_model_tensor_info info;
  const int64_t ids[TOKENS] = {2, 29, 7, 0, 13, 13, 5, 1}, types[TOKENS] = {0, 0, 0, 0, 1, 1, 1, 1},
                mask[TOKENS] = {1, 1, 1, 1, 1, 1, 0, 0};
  int64_t bad_ids[TOKENS];
  const int64_t *inputs[3] = {ids, types, mask};
  const float *probs = NULL;
  size_t i, row, col, bytes = 0, probs_index = 2;

  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  if (kiln_model_load(argv[1], &model) != KILN_MODEL_OK) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], kiln_model_last_error(NULL));
    return 1;
  }
  CHECK(kiln_model_num_inputs(model) == 3);
  for (i = 0; i < 3; ++i) {
    CHECK(kiln_model_input_info(model, i, &info) == KILN_MODEL_OK);
    CHECK(strcmp(info.dtype, "int64") == 0);
    CHECK(info.bytes == sizeof ids);
    CHECK(kiln_model_set_input(model, i, inputs[i], sizeof ids) == KILN_MODEL_OK);
  }
  CHECK(kiln_model_num_outputs(model) == 2);
  for (i = 0; i < 2; ++i) {
    CHECK(kiln_model_output_info(model, i, &info) == KILN_MODEL_OK);
    if (strcmp(info.name, "probs3") == 0) probs_index = i;
  }
  CHECK(probs_index < 2);
  CHECK(kiln_model_run(model) == KILN_MODEL_OK);
  CHECK(kiln_model_get_output(model, probs_index, (const void **)&probs, &bytes) == KILN_MODEL_OK);
  CHECK(bytes == TOKENS * TOKENS * sizeof(float));
  for (row = 0; row < TOKENS; ++row) {
    double sum = 0;
    for (col = 0; col < TOKENS; ++col) sum += probs[row * TOKENS + col];
    CHECK(fabs(sum - 1.0) < 1e-5);
    CHECK(probs[row * TOKENS + 6] < 1e-6 && probs[row * TOKENS + 7] < 1e-6);
  }

  memcpy(bad_ids, ids, sizeof ids);
  bad_ids[3] = -31;
  CHECK(kiln_model_set_input(model, 0, bad_ids, sizeof bad_ids) == KILN_MODEL_OK);
  CHECK(kiln_model_run(model) == KILN_MODEL_ERROR);
  CHECK(strstr(kiln_model_last_error(model), "input 'input_ids' holds -31 at element 3") != NULL);
  kiln_model_free(&model);
  CHECK(model == NULL);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("C API with token ids: ok\n");
  return 0;
}
