#include "codegen/cuda.h"

#include <map>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"

namespace kiln::codegen {

ir::GpuLimits gpu_limits(const Target &target) {
  if (target.backend().kind() != BackendKind::kCuda)
    throw CodegenError("target '" + target.str() + "' is not a cuda target");
  return ir::GpuLimits::of(target.max_threads_per_block, target.max_shared_memory_bytes,
                           target.max_registers_per_thread);
}

std::string ptx_isa_for(const Target &target) {
  try {
    return target.backend().ptx_isa(target);
  } catch (const std::invalid_argument &e) {
    throw CodegenError(e.what());
  }
}

nlohmann::json CudaModule::manifest() const {
  nlohmann::json m{{"name", name}, {"target", target}, {"arch", arch}, {"ptx_isa", ptx_isa}};
  m["buffers"] = nlohmann::json::array();
  for (const CudaBuffer &b : buffers)
    m["buffers"].push_back(
        {{"name", b.name}, {"dtype", ir::dtype_name(b.dtype)}, {"shape", b.shape}, {"role", b.role}});
  m["launches"] = nlohmann::json::array();
  for (const CudaLaunch &l : launches)
    m["launches"].push_back({{"name", l.name}, {"grid", l.grid}, {"block", l.block}, {"shared_bytes", l.shared_bytes}});
  return m;
}

std::string CudaModule::artifact_text() const {
  nlohmann::json a = manifest();
  a["kiln_cuda_artifact"] = KILN_CUDA_ARTIFACT_VERSION;
  a["ptx"] = ptx;
  if (!cubin.empty()) {
    static const char *const kDigits = "0123456789abcdef";
    std::string hex;
    hex.reserve(cubin.size() * 2);
    for (unsigned char c : cubin) {
      hex.push_back(kDigits[c >> 4]);
      hex.push_back(kDigits[c & 15]);
    }
    a["cubin_hex"] = hex;
    a["cubin_toolkit"] = cubin_toolkit;
  }
  return a.dump();
}

void check_registers(const CudaModule &module, const std::vector<PtxasKernelReport> &reports, const Target &target) {
  for (const CudaLaunch &launch : module.launches) {
    for (const PtxasKernelReport &r : reports) {
      if (r.name != launch.name) continue;
      int64_t threads = launch.block[0] * launch.block[1] * launch.block[2];
      if (r.registers > target.max_registers_per_thread)
        throw CodegenError("kernel " + r.name + " needs " + std::to_string(r.registers) + " registers per thread; " +
                           target.arch + " has " + std::to_string(target.max_registers_per_thread));
      if (r.registers * threads > target.registers_per_sm)
        throw CodegenError("kernel " + r.name + " needs " + std::to_string(r.registers) + " registers for each of " +
                           std::to_string(threads) + " threads, more than the " +
                           std::to_string(target.registers_per_sm) + " of an SM of " + target.arch +
                           " (fewer threads or smaller thread tiles)");
    }
  }
}

}  // namespace kiln::codegen
