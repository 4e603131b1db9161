// What each CUDA compute capability Kiln targets guarantees a kernel (the CUDA C
// Programming Guide's "technical specifications per compute capability"), and the SM
// count and L2 size of the board most people tune that capability for. Target::parse
// takes a cuda target's limits from here; the search and the GPU verification ask the
// Target, never the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct CudaArchFacts {
  const char *arch;                ///< "sm_90"
  int warp_size;                   ///< threads of a warp (32 on every NVIDIA GPU so far)
  int max_threads_per_block;       ///< 1024
  int max_threads_per_sm;          ///< resident threads per SM: occupancy's bound
  int max_blocks_per_sm;           ///< resident blocks per SM
  int64_t shared_per_block;        ///< bytes a block gets without the opt-in attribute
  int64_t shared_per_block_optin;  ///< bytes a block may get with cudaFuncAttributeMaxDynamicSharedMemorySize
  int64_t shared_per_sm;           ///< bytes of shared memory per SM
  int registers_per_sm;            ///< 32-bit registers per SM
  int max_registers_per_thread;
  const char *typical_device;  ///< the board the SM count and L2 size below describe
  int sm_count;
  int64_t l2_bytes;
  const char *ptx_isa;  ///< the PTX ISA version code for this arch is written in ("7.8")
};

/// The facts of `arch` ("sm_90"), or nullptr when Kiln has none.
const CudaArchFacts *find_cuda_arch(std::string_view arch);
/// The compute capability of an arch name as a number (90 for "sm_90"), -1 for
/// anything that is not "sm_" and digits: what "is this GPU at least that arch" compares.
int cuda_arch_number(std::string_view arch);
/// Every arch the table knows, in order ("sm_75", "sm_80", ...).
std::vector<std::string> known_cuda_archs();

}  // namespace kiln

namespace kiln {

/// The CUDA device this process sees (device 0), read through the driver API
/// (libcuda.so.1, opened with dlopen so that hosts without a GPU run Kiln too).
struct CudaDevice {
  std::string arch;  ///< "sm_90"
  int sm_count = 0;
  int64_t l2_bytes = 0;
  std::string name;  ///< the driver's, e.g. "NVIDIA H100 80GB HBM3"
};

/// The device present, or nullopt with the reason in `why` (no driver, no device, the
/// driver's error).
std::optional<CudaDevice> detect_cuda_device(std::string *why);

}  // namespace kiln
