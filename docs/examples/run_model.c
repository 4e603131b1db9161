/* Runs a compiled Kiln model from C: run_model MODEL.kiln [INPUT.bin ...]
 * Each INPUT.bin holds one input's raw bytes (in input order); inputs without a file
 * are zeros. Prints every output's first values. Build against an installed Kiln:
 *   cc run_model.c $(pkg-config --cflags --libs kiln_model) -o run_model */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kiln_model.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.kiln [INPUT.bin ...]\n", argv[0]);
    return 2;
  }
  kiln_model model = NULL;
  if (kiln_model_load(argv[1], &model) != KILN_MODEL_OK) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], kiln_model_last_error(model));
    kiln_model_free(&model);
    return 1;
  }
  for (size_t i = 0; i < kiln_model_num_inputs(model); ++i) {
    kiln_model_tensor_info info;
    kiln_model_input_info(model, i, &info);
    char *data = calloc(info.bytes, 1);
    if (data == NULL) return 1;
    if ((int)i + 2 < argc) {
      FILE *f = fopen(argv[i + 2], "rb");
      if (f == NULL || fread(data, 1, info.bytes, f) != info.bytes) {
        fprintf(stderr, "%s does not hold the %zu bytes of input '%s'\n", argv[i + 2], info.bytes, info.name);
        return 1;
      }
      fclose(f);
    }
    kiln_model_set_input(model, i, data, info.bytes);
    free(data);
  }
  if (kiln_model_run(model) != KILN_MODEL_OK) {
    fprintf(stderr, "run failed: %s\n", kiln_model_last_error(model));
    return 1;
  }
  for (size_t o = 0; o < kiln_model_num_outputs(model); ++o) {
    kiln_model_tensor_info info;
    const void *data;
    size_t bytes;
    kiln_model_output_info(model, o, &info);
    kiln_model_get_output(model, o, &data, &bytes);
    printf("output '%s' (%s):", info.name, info.dtype);
    if (strcmp(info.dtype, "float32") == 0)
      for (size_t k = 0; k < bytes / sizeof(float) && k < 8; ++k) printf(" %.5f", ((const float *)data)[k]);
    printf("\n");
  }
  kiln_model_free(&model);
  return 0;
}
