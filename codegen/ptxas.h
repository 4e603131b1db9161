// The CUDA toolkit's PTX assembler: running it on Kiln's PTX and reading its report
// (registers, spills, shared memory per kernel). A library of its own, without LLVM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::codegen {

/// What `ptxas -v` reports for one kernel.
struct PtxasKernelReport {
  std::string name;
  std::string arch;
  int registers = 0;
  int64_t shared_bytes = 0;  ///< static shared memory (Kiln's is dynamic: 0)
  int64_t stack_bytes = 0;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
};

/// Reads the kernels' reports out of `ptxas -v` output; lines it does not know are
/// skipped, so a newer ptxas's additions do not break it.
std::vector<PtxasKernelReport> parse_ptxas_report(const std::string &text);

/// The ptxas to run: $KILN_PTXAS when set, else /usr/local/cuda/bin/ptxas, else one on
/// PATH; "" when there is none.
std::string find_ptxas();

struct PtxasResult {
  std::vector<PtxasKernelReport> kernels;
  std::string cubin;  ///< the cubin for exactly `arch`
  /// The CUDA release of the ptxas ("13.0"): a driver of that release or newer loads
  /// the cubin.
  std::string toolkit;
  std::string log;  ///< ptxas's own output
};

/// Assembles `ptx` for `arch` with `ptxas -v`; throws CodegenError with ptxas's
/// message when it refuses the PTX, or when `ptxas` cannot be run.
PtxasResult run_ptxas(const std::string &ptx, const std::string &arch, const std::string &ptxas);

}  // namespace kiln::codegen
