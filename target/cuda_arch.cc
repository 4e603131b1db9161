#include "target/cuda_arch.h"

namespace kiln {
namespace {

constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;

// Limits per compute capability from the CUDA C Programming Guide (CUDA 13); the next
// three columns describe one board of that capability: a device present, or the
// target's -sm-count / -l2-bytes flags, say otherwise. The last is the oldest PTX ISA
// version that knows the arch (the PTX ISA manual's "PTX ISA Version" per target).
constexpr CudaArchFacts kArchs[] = {
    // arch    warp thr/blk thr/SM blk/SM smem/blk  opt-in          smem/SM      regs/SM  reg/thr board SMs  L2  PTX ISA
    {"sm_75", 32, 1024, 1024, 16, 48 * kKiB, 64 * kKiB, 64 * kKiB, 65536, 255, "Tesla T4", 40, 4 * kMiB, "6.3"},
    {"sm_80", 32, 1024, 2048, 32, 48 * kKiB, 163 * kKiB, 164 * kKiB, 65536, 255, "A100 SXM", 108, 40 * kMiB, "7.0"},
    {"sm_86", 32, 1024, 1536, 16, 48 * kKiB, 99 * kKiB, 100 * kKiB, 65536, 255, "A10", 72, 6 * kMiB, "7.1"},
    {"sm_87", 32, 1024, 1536, 16, 48 * kKiB, 163 * kKiB, 164 * kKiB, 65536, 255, "Jetson AGX Orin", 16, 4 * kMiB,
     "7.4"},
    {"sm_89", 32, 1024, 1536, 24, 48 * kKiB, 99 * kKiB, 100 * kKiB, 65536, 255, "L4", 58, 48 * kMiB, "7.8"},
    {"sm_90", 32, 1024, 2048, 32, 48 * kKiB, 227 * kKiB, 228 * kKiB, 65536, 255, "H100 SXM", 132, 50 * kMiB, "7.8"},
};

}  // namespace

const CudaArchFacts *find_cuda_arch(std::string_view arch) {
  for (const CudaArchFacts &f : kArchs)
    if (arch == f.arch) return &f;
  return nullptr;
}

int cuda_arch_number(std::string_view arch) {
  if (arch.substr(0, 3) != "sm_" || arch.size() < 5 || arch.size() > 8) return -1;
  int n = 0;
  for (char c : arch.substr(3)) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

std::vector<std::string> known_cuda_archs() {
  std::vector<std::string> out;
  for (const CudaArchFacts &f : kArchs) out.emplace_back(f.arch);
  return out;
}

}  // namespace kiln
