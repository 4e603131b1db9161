/* The C ABI between generated kernels, the runtime and whoever loads them.
 *
 * An artifact is a shared library (ELF .so for x86-64 or AArch64) that exports:
 *
 *   int32_t kiln_entry(void **args);
 *       Runs the kernel. args[i] is the data pointer of parameter i (inputs first, then
 *       outputs, in the order of kiln_artifact_info's "params"); every buffer is dense,
 *       row-major and at least 64-byte aligned. Returns 0 on success,
 *       KILN_ERR_OUT_OF_MEMORY when scratch memory could not be allocated (nothing is
 *       leaked; the outputs are undefined), or the non-zero code a parallel task or
 *       kiln_rt_parallel_for returned.
 *
 *   const char kiln_artifact_info[];
 *       NUL-terminated JSON: {"kiln_abi": 1 or 2, "name": ..., "target": ...,
 *       "params": [{"name": ..., "dtype": "float32", "shape": [..],
 *                   "role": "input" | "output"}, ...]}.
 *
 * Version 2 adds packed constant inputs (ir/layout_rewrite.h). A param with
 *       "packed_from": {"name": ..., "dtype": ..., "shape": [..]}
 * is a weight in a layout packed ahead of time: the caller passes the packed buffer
 * (the param's own shape), made once from the weight (the "packed_from" tensor) by
 *
 *   int32_t kiln_prepack(void **args);
 *       args = (weight, packed buffer) for each packed param, in param order. Fills the
 *       whole packed buffer (padding with zeros); returns 0 or an error code like
 *       kiln_entry's. Run it again whenever the weight changes.
 *
 * Artifacts without packed params say version 1 and export no kiln_prepack, so loaders
 * that know only version 1 keep loading them.
 *
 * Generated code calls only the runtime functions below (and libm); they are resolved
 * when the artifact is loaded into a process linked with libkiln_runtime, so a runner
 * needs no compiler and artifacts need no other libraries.
 */
#ifndef KILN_CODEGEN_ABI_H_
#define KILN_CODEGEN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_VERSION 2
#define KILN_ENTRY_SYMBOL "kiln_entry"
#define KILN_PREPACK_SYMBOL "kiln_prepack"
#define KILN_INFO_SYMBOL "kiln_artifact_info"
/* A CUDA artifact is a JSON file, not a library: "kiln_cuda_artifact" holds this
   version, beside the PTX, its buffers and launches (device/cuda_artifact.h). */
#define KILN_CUDA_ARTIFACT_VERSION 1

typedef int32_t (*kiln_entry_fn)(void **args);

/* kiln_entry's result codes besides 0. */
#define KILN_ERR_OUT_OF_MEMORY 12

/* One chunk of a parallel loop: runs iterations for task `task_id` of `num_tasks`;
 * returns 0 on success. */
typedef int32_t (*kiln_task_fn)(int64_t task_id, int64_t num_tasks, void *closure);

/* Runs fn(t, n, closure) for t in [0, n) on the runtime's persistent thread pool (the
 * caller runs task 0); returns the first non-zero result or 0. n <= 0 means "one task
 * per worker thread". Nested calls run serially in the calling thread. */
int32_t kiln_rt_parallel_for(int64_t num_tasks, kiln_task_fn fn, void *closure);

/* Number of threads parallel loops use (including the caller). */
int32_t kiln_rt_num_threads(void);
/* Sets the thread count (>= 1); takes effect for the next parallel_for. */
void kiln_rt_set_num_threads(int32_t n);

/* Scratch memory for buffers too large for the stack, 64-byte aligned; NULL when it
 * cannot be allocated (the kernel then returns KILN_ERR_OUT_OF_MEMORY). Freed blocks
 * are kept per thread (up to 16 blocks, 32 MiB) and handed out again for the same
 * size, so a kernel's scratch memory stays mapped from one call to the next. */
void *kiln_rt_alloc_workspace(size_t bytes);
void kiln_rt_free_workspace(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* KILN_CODEGEN_ABI_H_ */
