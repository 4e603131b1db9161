/*
 * kiln_model.h - the C interface to a compiled Kiln model.
 *
 * Programs embed a model that `kiln compile` built (a folder): load it, write
 * the inputs, run, read the outputs. No compiler is needed at run time. Plain
 * C99; no C++ exception escapes. Link with -lkiln_model (which brings
 * libkiln_runtime, the thread pool the model's code calls).
 *
 * Stability: functions marked "since: 1.0" keep their signature and meaning
 * for every 1.x release; new functions may be added in minor releases.
 *
 * Threads: a kiln_model handle may be used by one thread at a time; load one
 * handle per thread to run inferences concurrently. Every model's parallel
 * loops share the process's thread pool (kiln_model_set_threads).
 *
 * Memory: loading allocates the weights and one arena for every activation;
 * kiln_model_run allocates nothing.
 *
 * Dynamic dimensions (since 1.1): a model compiled with `--dim NAME=MIN..MAX`
 * takes inputs of any shape in its ranges. Its info reports -1 for a dynamic
 * axis (and 0 bytes for a tensor with one); set its inputs with
 * kiln_model_set_input_shaped, run, and read each output's actual shape with
 * kiln_model_output_shape. Such a model loads each bucket when a call first
 * needs it, and a run copies the inputs and outputs.
 */
#ifndef KILN_MODEL_H
#define KILN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MODEL_API_VERSION_MAJOR 1
#define KILN_MODEL_API_VERSION_MINOR 1
#define KILN_MODEL_API_VERSION_PATCH 0
#define KILN_MODEL_API_VERSION \
  (KILN_MODEL_API_VERSION_MAJOR * 10000 + KILN_MODEL_API_VERSION_MINOR * 100 + KILN_MODEL_API_VERSION_PATCH)

#if defined(_WIN32)
#define KILN_MODEL_API
#else
#define KILN_MODEL_API __attribute__((visibility("default")))
#endif

/* Result of every fallible call. */
typedef enum kiln_model_status {
  KILN_MODEL_OK = 0,
  KILN_MODEL_INVALID_ARGUMENT = 1, /* a NULL handle or pointer, an index out of range, a wrong size */
  KILN_MODEL_ERROR = 2             /* the model could not be loaded or failed to run; see kiln_model_last_error */
} kiln_model_status;

/* A loaded model. Opaque. Release with kiln_model_free. */
typedef struct kiln_model_s *kiln_model;

/* An input or output tensor. The pointers are owned by the model handle and
 * stay valid until kiln_model_free. */
typedef struct kiln_model_tensor_info {
  const char *name;     /* the model's tensor name */
  const char *dtype;    /* "float32", "float16", "int64" (token ids), "int32", "int8", "bool" */
  int rank;             /* number of dimensions */
  const int64_t *shape; /* rank dimensions, row-major layout */
  size_t bytes;         /* size of the tensor's data */
} kiln_model_tensor_info;

/* Loads the compiled model in folder `dir`. On success sets *out_model and
 * returns KILN_MODEL_OK. On failure it still sets *out_model to a handle that
 * only holds the error (NULL if memory ran out): read it with
 * kiln_model_last_error, then release it with kiln_model_free.
 * since: 1.0 */
KILN_MODEL_API kiln_model_status kiln_model_load(const char *dir, kiln_model *out_model);

/* How many inputs and outputs the model has (0 for a NULL or failed handle).
 * since: 1.0 */
KILN_MODEL_API size_t kiln_model_num_inputs(kiln_model model);
KILN_MODEL_API size_t kiln_model_num_outputs(kiln_model model);

/* Describes input or output `index`.
 * since: 1.0 */
KILN_MODEL_API kiln_model_status kiln_model_input_info(kiln_model model, size_t index,
                                                       kiln_model_tensor_info *out_info);
KILN_MODEL_API kiln_model_status kiln_model_output_info(kiln_model model, size_t index,
                                                        kiln_model_tensor_info *out_info);

/* Copies `bytes` bytes (exactly the input's size) into input `index`.
 * since: 1.0 */
KILN_MODEL_API kiln_model_status kiln_model_set_input(kiln_model model, size_t index, const void *data, size_t bytes);

/* Runs one inference on the inputs set so far. An input of row indices (token
 * ids) holding one outside its table fails with KILN_MODEL_ERROR, and
 * kiln_model_last_error names the input and the element.
 * since: 1.0 */
KILN_MODEL_API kiln_model_status kiln_model_run(kiln_model model);

/* Points *out_data at output `index` and sets *out_bytes to its size. The data
 * is the model's own: valid until the next kiln_model_run or kiln_model_free;
 * copy what you keep.
 * since: 1.0 */
KILN_MODEL_API kiln_model_status kiln_model_get_output(kiln_model model, size_t index, const void **out_data,
                                                       size_t *out_bytes);

/* Threads of the process-wide pool that runs parallel loops (1 or more).
 * since: 1.0 */
KILN_MODEL_API kiln_model_status kiln_model_set_threads(int threads);

/* The message of the last failed call on `model`, or "" if it succeeded.
 * Owned by `model`: valid until the next call on it. For NULL, a message
 * saying so.
 * since: 1.0 */
KILN_MODEL_API const char *kiln_model_last_error(kiln_model model);

/* Releases the model. NULL-safe; sets *model to NULL.
 * since: 1.0 */
KILN_MODEL_API void kiln_model_free(kiln_model *model);

/* How many dynamic dimensions the model has (0 for a fixed-shape model or a
 * NULL or failed handle); dimension `index`'s name and range.
 * since: 1.1 */
KILN_MODEL_API size_t kiln_model_num_dims(kiln_model model);
KILN_MODEL_API kiln_model_status kiln_model_dim_info(kiln_model model, size_t index, const char **out_name,
                                                     int64_t *out_min, int64_t *out_max);

/* Copies input `index` of the given shape (rank dimensions; `bytes` must be
 * its size). For a fixed-shape model the shape must be the input's. The shape
 * is checked against the model's ranges at kiln_model_run, which names a
 * dimension outside its range or inputs that disagree on one.
 * since: 1.1 */
KILN_MODEL_API kiln_model_status kiln_model_set_input_shaped(kiln_model model, size_t index, const void *data, int rank,
                                                             const int64_t *shape, size_t bytes);

/* The shape of output `index` after the last kiln_model_run (the declared one
 * for a fixed-shape model): *out_rank dimensions at *out_shape, owned by the
 * model, valid until the next run or free.
 * since: 1.1 */
KILN_MODEL_API kiln_model_status kiln_model_output_shape(kiln_model model, size_t index, int *out_rank,
                                                         const int64_t **out_shape);

/* The API version the library implements, as KILN_MODEL_API_VERSION encodes it.
 * since: 1.0 */
KILN_MODEL_API int kiln_model_library_api_version(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_MODEL_H */
