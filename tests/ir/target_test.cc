// Target parsing: accepted forms, derived facts, canonical strings, errors.

#include "target/target.h"
#include "target/cuda_arch.h"

#include <gtest/gtest.h>

#include <sstream>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kiln {
namespace {

std::string parse_error(std::string_view text) {
  try {
    Target::parse(text);
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Target, ParsesX86WithAllFlags) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -num-cores=2");
  EXPECT_EQ(t.kind, "llvm");
  EXPECT_EQ(t.mtriple, "x86_64-linux-gnu");
  EXPECT_EQ(t.mcpu, "sapphirerapids");
  EXPECT_EQ(t.num_cores, 2);
  EXPECT_EQ(t.vector_width_bits, 512);
  EXPECT_TRUE(t.is_x86());
  EXPECT_FALSE(t.is_aarch64());
  EXPECT_EQ(t.device_kind(), "cpu-x86_64");
  EXPECT_EQ(t.device_model(), "sapphirerapids");
  EXPECT_EQ(t.max_threads_per_block, 0);
}

TEST(Target, VectorWidthFollowsCpu) {
  EXPECT_EQ(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake").vector_width_bits, 256);
  EXPECT_EQ(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4").vector_width_bits, 512);
  EXPECT_EQ(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78").vector_width_bits, 128);
}

TEST(Target, CrossCpuDefaultsToOneCoreAndGenericCpu) {
  Target t = Target::parse("llvm -mtriple=aarch64-linux-gnu");
  EXPECT_TRUE(t.is_aarch64());
  EXPECT_EQ(t.mcpu, "generic");
  EXPECT_EQ(t.num_cores, 1);
  EXPECT_EQ(t.device_kind(), "cpu-aarch64");
}

TEST(Target, NativeHostUsesHardwareConcurrency) {
  Target t = Target::parse("llvm");
  EXPECT_EQ(t.mtriple, host_triple());
  EXPECT_EQ(t.mcpu, host_cpu());
  EXPECT_EQ(t.num_cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// `native` names this host's CPU before anything is stored or looked up, so records of
// two machines never share a target; only strings read back from storage keep it.
TEST(Target, NativeResolvesToTheHostCpu) {
  Target t = Target::parse("llvm -mcpu=native -num-cores=2");
  EXPECT_NE(t.mcpu, "native");
  EXPECT_FALSE(t.mcpu.empty());
  EXPECT_EQ(t.device_model(), host_cpu());
  EXPECT_EQ(t.str(), "llvm -mcpu=" + host_cpu() + " -mtriple=" + host_triple() + " -num-cores=2");
  EXPECT_EQ(Target::parse(t.str()), t);
#if defined(__x86_64__)
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (host_cpu_stands_in())  // KILN_HOST_CPU: the CPU it names, no wider than the host's
    EXPECT_EQ(t.vector_width_bits, x86_vector_bits(host_cpu())) << host_cpu();
  else
    EXPECT_EQ(t.vector_width_bits, avx512 ? 512 : 256) << host_cpu();
  EXPECT_LE(t.vector_width_bits, avx512 ? 512 : 256) << host_cpu();
#endif
  Target stored = Target::parse("llvm -mcpu=native -mtriple=x86_64-linux-gnu -num-cores=2", NativeCpu::kKeepAsStored);
  EXPECT_EQ(stored.mcpu, "native");
  EXPECT_EQ(stored.str(), "llvm -mcpu=native -mtriple=x86_64-linux-gnu -num-cores=2");
  EXPECT_EQ(x86_vector_bits("native"), 0);
}

TEST(Target, VectorBitsOfX86Cpus) {
  EXPECT_EQ(x86_vector_bits("znver3"), 256);
  EXPECT_EQ(x86_vector_bits("x86-64-v3"), 256);
  EXPECT_EQ(x86_vector_bits("znver4"), 512);
  EXPECT_EQ(x86_vector_bits("emeraldrapids"), 512);
  EXPECT_EQ(x86_vector_bits("x86-64-v4"), 512);
}

TEST(Target, ParsesCudaWithDefaults) {
  Target t = Target::parse("cuda -arch=sm_90");
  EXPECT_TRUE(t.is_cuda());
  EXPECT_EQ(t.arch, "sm_90");
  EXPECT_EQ(t.max_threads_per_block, 1024);
  EXPECT_EQ(t.max_shared_memory_bytes, 49152);
  EXPECT_EQ(t.device_kind(), "cuda");
  EXPECT_EQ(t.device_model(), "sm_90");
  EXPECT_FALSE(t.is_x86());
  EXPECT_EQ(t.str(), "cuda -arch=sm_90");
}

// A cuda target carries its arch's limits (target/cuda_arch.h) and its board's size; a
// board other than the arch's typical one says so in flags, which the key then keeps.
TEST(Target, CudaTargetsCarryTheirArchsLimits) {
  Target h100 = Target::parse("cuda -arch=sm_90");
  EXPECT_EQ(h100.warp_size, 32);
  EXPECT_EQ(h100.max_threads_per_sm, 2048);
  EXPECT_EQ(h100.max_shared_memory_optin_bytes, 227 * 1024);
  EXPECT_EQ(h100.registers_per_sm, 65536);
  EXPECT_EQ(h100.max_registers_per_thread, 255);
  EXPECT_EQ(h100.sm_count, 132);
  EXPECT_EQ(h100.l2_bytes, 50 * 1024 * 1024);
  Target orin = Target::parse("cuda -arch=sm_87");
  EXPECT_EQ(orin.sm_count, 16);
  EXPECT_EQ(orin.max_threads_per_sm, 1536);
  EXPECT_EQ(orin.max_shared_memory_optin_bytes, 163 * 1024);
  // An H100 PCIe: 114 SMs; the key names what differs from the SXM board.
  Target pcie = Target::parse("cuda -sm-count=114 -arch=sm_90");
  EXPECT_EQ(pcie.str(), "cuda -arch=sm_90 -sm-count=114");
  EXPECT_EQ(Target::parse(pcie.str()), pcie);
  EXPECT_NE(pcie, h100);
  for (const std::string &arch : known_cuda_archs()) {
    Target t = Target::parse("cuda -arch=" + arch);
    EXPECT_EQ(t.str(), "cuda -arch=" + arch);
    EXPECT_LE(t.max_shared_memory_bytes, t.max_shared_memory_optin_bytes) << arch;
    EXPECT_GT(t.sm_count, 0) << arch;
  }
  EXPECT_NE(parse_error("cuda -arch=sm_61").find("unknown -arch 'sm_61'"), std::string::npos);
  EXPECT_NE(parse_error("cuda -arch=sm_61").find("sm_75, sm_80"), std::string::npos);
  EXPECT_NE(parse_error("cuda -arch=sm_86 -max-shared-memory-per-block=200000").find("opt-in (101376 bytes)"),
            std::string::npos);
  EXPECT_NE(parse_error("cuda -arch=sm_90 -max-threads-per-block=2048").find("exceeds sm_90's 1024"),
            std::string::npos);
  EXPECT_NE(parse_error("cuda -arch=sm_90 -sm-count=0").find("positive integer"), std::string::npos);
  // `cuda` alone is the device present; on a host without one the message says why.
  std::string why;
  if (std::optional<CudaDevice> device = detect_cuda_device(&why)) {
    Target present = Target::parse("cuda");
    EXPECT_EQ(present.arch, device->arch);
    EXPECT_EQ(present.sm_count, device->sm_count);
    EXPECT_EQ(Target::parse(present.str()), present);
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_NE(parse_error("cuda").find("or a CUDA device present: " + why), std::string::npos) << parse_error("cuda");
  }
  // A stored record of an arch without facts reads back as itself.
  Target stored = Target::parse("cuda -arch=sm_61 -sm-count=28", NativeCpu::kKeepAsStored);
  EXPECT_EQ(stored.sm_count, 28);
  EXPECT_EQ(stored.l2_bytes, 0);
  EXPECT_EQ(stored.str(), "cuda -arch=sm_61 -sm-count=28");
  EXPECT_EQ(Target::parse(stored.str(), NativeCpu::kKeepAsStored), stored);
}

TEST(Target, CanonicalStringSortsFlagsAndIsStable) {
  Target a = Target::parse("llvm  -num-cores=4 -mcpu=cortex-a78   -mtriple=aarch64-linux-gnu");
  Target b = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78 -num-cores=4");
  EXPECT_EQ(a.str(), "llvm -mcpu=cortex-a78 -mtriple=aarch64-linux-gnu -num-cores=4");
  EXPECT_EQ(a.str(), b.str());
  EXPECT_EQ(Target::parse(a.str()), a);
  Target c = Target::parse("cuda -max-threads-per-block=512 -arch=sm_80 -max-shared-memory-per-block=101376");
  EXPECT_EQ(c.str(), "cuda -arch=sm_80 -max-shared-memory-per-block=101376 -max-threads-per-block=512");
  EXPECT_EQ(Target::parse(c.str()), c);
}

TEST(Target, ErrorsNameTheProblem) {
  EXPECT_EQ(parse_error("foo -mcpu=x"), "unknown target kind 'foo'; expected llvm or cuda");
  EXPECT_NE(parse_error("llvm -x").find("bad flag '-x' in target 'llvm -x'"), std::string::npos);
  EXPECT_NE(parse_error("llvm -arch=sm_90").find("bad flag '-arch'"), std::string::npos);
  EXPECT_NE(parse_error("llvm -mcpu=a -mcpu=b").find("given twice"), std::string::npos);
  EXPECT_NE(parse_error("llvm -num-cores=zero").find("positive integer"), std::string::npos);
  EXPECT_NE(parse_error("llvm -num-cores=0").find("positive integer"), std::string::npos);
  EXPECT_NE(parse_error("cuda").find("needs -arch"), std::string::npos);
  EXPECT_NE(parse_error("cuda -arch=90").find("expected sm_XY"), std::string::npos);
  EXPECT_NE(parse_error("").find("empty target"), std::string::npos);
  EXPECT_NE(parse_error("llvm -mtriple=riscv64-linux-gnu -mcpu=native").find("not this host"), std::string::npos);
}

// A value short enough for the whole string but long enough that the canonical form
// (which adds the default triple and core count) would pass the length limit must be
// refused up front: a stored target has to read back as itself.
TEST(Target, OverlongFlagValuesAreRefusedSoCanonicalFormsReadBack) {
  std::string long_cpu = "llvm -mcpu=" + std::string(1000, 'a');
  EXPECT_NE(parse_error(long_cpu).find("flag '-mcpu' has a value of 1000 characters"), std::string::npos);
  Target longest_accepted = Target::parse(
      "llvm -mcpu=" + std::string(128, 'a') + " -mtriple=" + std::string(128, 'b') + " -num-cores=2147483647",
      NativeCpu::kKeepAsStored);
  EXPECT_EQ(Target::parse(longest_accepted.str(), NativeCpu::kKeepAsStored).str(), longest_accepted.str());
}

// AArch64 boards name their cores in /proc/cpuinfo: Arm's designs by part number,
// NVIDIA's Carmel (Jetson Xavier) by its own implementer; anything else is generic.
TEST(Target, Aarch64CoresAreNamedFromCpuinfo) {
  auto cpu_of = [](const std::string &text) {
    std::istringstream in(text);
    return aarch64_cpu_from_cpuinfo(in);
  };
  const std::string orin =
      "processor\t: 0\nBogoMIPS\t: 62.50\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
      "CPU variant\t: 0x1\nCPU part\t: 0xd42\nCPU revision\t: 1\n";
  EXPECT_EQ(cpu_of(orin), "cortex-a78");
  const std::string xavier =
      "processor\t: 0\nCPU implementer\t: 0x4e\nCPU architecture: 8\nCPU variant\t: 0x0\n"
      "CPU part\t: 0x004\nCPU revision\t: 0\n";
  EXPECT_EQ(cpu_of(xavier), "carmel");
  EXPECT_EQ(cpu_of("CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"), "neoverse-n1");
  EXPECT_EQ(cpu_of("CPU implementer\t: 0x61\nCPU part\t: 0x022\n"), "generic");  // Apple
  EXPECT_EQ(cpu_of("CPU implementer\t: garbage\nCPU part\t: \n"), "generic");
  EXPECT_EQ(cpu_of(""), "generic");
  // What Kiln names, LLVM knows: the AArch64 target parses and keeps it.
  EXPECT_EQ(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=carmel").mcpu, "carmel");
}

// Each kind of target has one backend, which owns the facts the layers above decide on.
TEST(Backend, EachKindOfTargetHasOneWithItsFacts) {
  Target avx2 = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  Target avx512 = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  Target arm = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1");
  Target riscv = Target::parse("llvm -mtriple=riscv64-linux-gnu");
  Target gpu = Target::parse("cuda -arch=sm_87");
  EXPECT_EQ(avx2.backend().kind(), BackendKind::kX86Cpu);
  EXPECT_EQ(&avx2.backend(), &avx512.backend());
  EXPECT_EQ(arm.backend().kind(), BackendKind::kAArch64Cpu);
  EXPECT_EQ(riscv.backend().kind(), BackendKind::kOtherCpu);
  EXPECT_EQ(gpu.backend().kind(), BackendKind::kCuda);
  // Register files: 16 vector registers on AVX2, 32 on AVX-512 and AArch64.
  EXPECT_EQ(avx2.backend().vector_registers(avx2), 16);
  EXPECT_EQ(avx2.backend().accumulator_registers(avx2), 14);
  EXPECT_EQ(avx512.backend().vector_registers(avx512), 32);
  EXPECT_EQ(arm.backend().accumulator_registers(arm), 24);
  // What a program becomes, and where it runs.
  EXPECT_FALSE(avx2.backend().is_gpu());
  EXPECT_TRUE(gpu.backend().is_gpu());
  EXPECT_STREQ(arm.backend().artifact_extension(), ".so");
  EXPECT_STREQ(gpu.backend().artifact_extension(), ".cuda.json");
  EXPECT_TRUE(avx2.backend().chooses_programs_in_model());
  EXPECT_FALSE(gpu.backend().chooses_programs_in_model());
  EXPECT_NE(gpu.backend().why_this_host_cannot_run(gpu).find("CUDA GPU"), std::string::npos);
  // CUDA's Tensor Cores are not listed yet.
  EXPECT_TRUE(gpu.backend().matrix_instructions(gpu).empty());
}

std::vector<std::string> instruction_names(const Target &t) {
  std::vector<std::string> names;
  for (const MatrixInstruction &i : t.backend().matrix_instructions(t)) names.push_back(i.name);
  return names;
}

// The matrix instructions a target offers follow its features: the CPU name's, then
// -mattr's additions and removals. A target string names its features canonically.
TEST(Backend, MatrixInstructionsFollowTheTargetsFeatures) {
  using Names = std::vector<std::string>;
  Target zen3 = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  EXPECT_TRUE(instruction_names(zen3).empty());
  Target zen4 = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  EXPECT_EQ(instruction_names(zen4), (Names{"avx512_bf16.vdpbf16ps", "avx512_vnni.vpdpbusd"}));
  Target spr = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  EXPECT_EQ(instruction_names(spr).front(), "amx.tdpbf16ps");
  EXPECT_EQ(instruction_names(spr).size(), 5u);
  // A guest whose CPU name has no AMX, given it by -mattr; one that is denied it.
  Target rocket = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=rocketlake -mattr=+amx-bf16,+amx-tile");
  EXPECT_EQ(instruction_names(rocket), (Names{"amx.tdpbf16ps", "avx512_vnni.vpdpbusd"}));
  EXPECT_EQ(rocket.str(), "llvm -mattr=+amx-bf16,+amx-tile -mcpu=rocketlake -mtriple=x86_64-linux-gnu -num-cores=1");
  EXPECT_EQ(Target::parse(rocket.str()).str(), rocket.str());
  Target denied = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -mattr=-amx-bf16,-amx-int8");
  EXPECT_EQ(instruction_names(denied).front(), "avx512_bf16.vdpbf16ps");
  Target orin = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78");
  EXPECT_EQ(instruction_names(orin), (Names{"neon.sdot"}));
  Target graviton3 = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1");
  EXPECT_EQ(instruction_names(graviton3), (Names{"neon.smmla", "neon.bfmmla", "neon.sdot"}));
  // Features are LLVM's words, each added or removed once.
  for (const char *bad : {"-mattr=avx512bf16", "-mattr=+AVX", "-mattr=+a,-a", "-mattr="}) {
    std::string text = std::string("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 ") + bad;
    EXPECT_THROW(Target::parse(text), std::invalid_argument) << text;
  }
}

// /proc/cpuinfo's flags name the features the host has, whatever its CPU name says.
TEST(Backend, HostFeaturesComeFromCpuinfoFlags) {
  std::istringstream x86(
      "processor : 0\nmodel name : Intel Xeon\nflags : fpu avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile "
      "amx_int8 avx512_fp16\nprocessor : 1\nflags : fpu\n");
  EXPECT_EQ(cpu_features_from_cpuinfo(x86),
            (std::set<std::string>{"amx-bf16", "amx-int8", "amx-tile", "avx512bf16", "avx512fp16", "avx512vnni"}));
  std::istringstream arm("processor : 0\nFeatures : fp asimd asimddp i8mm bf16\n");
  EXPECT_EQ(cpu_features_from_cpuinfo(arm), (std::set<std::string>{"bf16", "dotprod", "i8mm"}));
  std::istringstream none("processor : 0\n");
  EXPECT_TRUE(cpu_features_from_cpuinfo(none).empty());
}

// The PTX ISA of every arch comes from the arch's facts, the one table of archs.
TEST(Backend, EveryCudaArchHasItsPtxIsa) {
  for (const std::string &arch : known_cuda_archs()) {
    Target t = Target::parse("cuda -arch=" + arch);
    EXPECT_EQ(t.backend().ptx_isa(t), find_cuda_arch(arch)->ptx_isa) << arch;
    EXPECT_GT(cuda_arch_number(arch), 70) << arch;
  }
  Target sm87 = Target::parse("cuda -arch=sm_87");
  EXPECT_EQ(sm87.backend().ptx_isa(sm87), "7.4");  // what JetPack 5's CUDA 11.4 reads
  Target cpu = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  EXPECT_THROW(cpu.backend().ptx_isa(cpu), std::invalid_argument);
  EXPECT_EQ(cuda_arch_number("sm_90"), 90);
  EXPECT_EQ(cuda_arch_number("sm_9x"), -1);
  EXPECT_EQ(cuda_arch_number("compute_90"), -1);
}

}  // namespace
}  // namespace kiln
