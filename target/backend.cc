#include "target/backend.h"

#include <stdexcept>

#include "target/cuda_arch.h"

namespace kiln {
namespace {

std::string triple_arch_name(const std::string &triple) {
  std::string a = triple.substr(0, triple.find('-'));
  return a == "arm64" ? std::string("aarch64") : a;
}

// CPU code runs where the architecture and the operating system are the host's.
std::string why_host_cannot_run_cpu_code(const Target &target) {
  const std::string host = host_triple();
  const std::string arch = triple_arch_name(target.mtriple);
  if (arch != triple_arch_name(host))
    return "it is " + std::string(arch.find_first_of("aeioux") == 0 ? "an " : "a ") + arch + " CPU and this host is " +
           triple_arch_name(host);
  if ((target.mtriple.find("linux") == std::string::npos) != (host.find("linux") == std::string::npos))
    return "its code is for another operating system ('" + target.mtriple + "') than this host's ('" + host + "')";
  return "";
}

class CpuBackend : public Backend {
 public:
  bool is_gpu() const override { return false; }
  const char *artifact_extension() const override { return ".so"; }
  std::string why_this_host_cannot_run(const Target &target) const override {
    return why_host_cannot_run_cpu_code(target);
  }
};

// The instructions of `table` whose feature the target has.
std::vector<MatrixInstruction> offered(const Target &target, const std::vector<MatrixInstruction> &table) {
  std::vector<MatrixInstruction> out;
  for (const MatrixInstruction &i : table)
    if (target.has_feature(i.feature)) out.push_back(i);
  return out;
}

class X86Backend final : public CpuBackend {
 public:
  BackendKind kind() const override { return BackendKind::kX86Cpu; }
  const char *name() const override { return "x86-64 CPU"; }
  // m x n x k of one instruction: a dot-product instruction computes a row of 16 lanes
  // (n) over k products per lane; an AMX tile product a 16 x 16 tile of 32-bit results.
  std::vector<MatrixInstruction> matrix_instructions(const Target &target) const override {
    static const std::vector<MatrixInstruction> table = {
        {"amx.tdpbf16ps", "amx-bf16", "bfloat16", "float32", 16, 16, 32},
        {"amx.tdpbusd", "amx-int8", "uint8", "int32", 16, 16, 64},
        {"avx512_bf16.vdpbf16ps", "avx512bf16", "bfloat16", "float32", 1, 16, 2},
        {"avx512_vnni.vpdpbusd", "avx512vnni", "uint8", "int32", 1, 16, 4},
        {"avx_vnni.vpdpbusd", "avxvnni", "uint8", "int32", 1, 8, 4},
    };
    return offered(target, table);
  }
  int vector_registers(const Target &target) const override { return target.vector_width_bits >= 512 ? 32 : 16; }
  std::string why_this_host_cannot_run(const Target &target) const override {
    if (std::string why = why_host_cannot_run_cpu_code(target); !why.empty()) return why;
    // Code for wider vectors than this CPU's loads, then dies of SIGILL; so does code
    // with a matrix instruction this CPU lacks.
    if (x86_vector_bits(target.mcpu) > x86_vector_bits(host_cpu()))
      return "its CPU (" + target.mcpu + ") has " + std::to_string(x86_vector_bits(target.mcpu)) +
             "-bit vectors, which this host (" + host_cpu() + ") does not have";
    Target host = Target::parse("llvm -mcpu=native");
    for (const MatrixInstruction &i : matrix_instructions(target))
      if (!host.has_feature(i.feature))
        return "its code may use " + i.feature + " (" + i.name + "), which this host (" + host_cpu() +
               ") does not have";
    return "";
  }
};

class AArch64Backend final : public CpuBackend {
 public:
  BackendKind kind() const override { return BackendKind::kAArch64Cpu; }
  const char *name() const override { return "AArch64 CPU"; }
  std::vector<MatrixInstruction> matrix_instructions(const Target &target) const override {
    static const std::vector<MatrixInstruction> table = {
        {"neon.smmla", "i8mm", "int8", "int32", 2, 2, 8},
        {"neon.bfmmla", "bf16", "bfloat16", "float32", 2, 2, 4},
        {"neon.sdot", "dotprod", "int8", "int32", 1, 4, 4},
    };
    return offered(target, table);
  }
  int vector_registers(const Target &) const override { return 32; }  // v0..v31
};

class OtherCpuBackend final : public CpuBackend {
 public:
  BackendKind kind() const override { return BackendKind::kOtherCpu; }
  const char *name() const override { return "CPU"; }
};

class CudaBackend final : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kCuda; }
  const char *name() const override { return "CUDA GPU"; }
  bool is_gpu() const override { return true; }
  const char *artifact_extension() const override { return ".cuda.json"; }
  std::string why_this_host_cannot_run(const Target &) const override {
    return "it is a CUDA GPU, and this code runs on the CPU";
  }
  std::string ptx_isa(const Target &target) const override {
    const CudaArchFacts *facts = find_cuda_arch(target.arch);
    if (!facts) throw std::invalid_argument("no PTX ISA version known for arch '" + target.arch + "'");
    return facts->ptx_isa;
  }
};

}  // namespace

int Backend::vector_registers(const Target &) const { return 16; }

int Backend::accumulator_registers(const Target &target) const { return vector_registers(target) == 32 ? 24 : 14; }

std::vector<MatrixInstruction> Backend::matrix_instructions(const Target &) const { return {}; }

std::string Backend::ptx_isa(const Target &target) const {
  throw std::invalid_argument("target '" + target.str() + "' is not a CUDA target: it has no PTX ISA");
}

const Backend &backend_of(const Target &target) {
  static const X86Backend x86;
  static const AArch64Backend aarch64;
  static const OtherCpuBackend other_cpu;
  static const CudaBackend cuda;
  if (target.is_cuda()) return cuda;
  if (target.is_x86()) return x86;
  if (target.is_aarch64()) return aarch64;
  return other_cpu;
}

const Backend &Target::backend() const { return backend_of(*this); }

}  // namespace kiln
