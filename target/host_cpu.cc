// The host CPU's LLVM name, read from cpuid (x86-64) or /proc/cpuinfo (AArch64)
// without LLVM, so that the database and its C API resolve `-mcpu=native` exactly as
// the tuner does.

#include "target/target.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln {
namespace {

#if defined(__x86_64__)
struct X86Id {
  std::string vendor;
  unsigned family = 0, model = 0;
};

X86Id read_x86_id() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  X86Id id;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return id;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  id.vendor = vendor;
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  unsigned base_family = (eax >> 8) & 0xf, base_model = (eax >> 4) & 0xf;
  id.family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  id.model = (base_family == 0x6 || base_family == 0xf) ? base_model | (((eax >> 16) & 0xf) << 4) : base_model;
  return id;
}

bool in(unsigned value, std::initializer_list<unsigned> set) {
  for (unsigned v : set)
    if (v == value) return true;
  return false;
}

// The model table follows LLVM's host detection (llvm/lib/TargetParser/Host.cpp) for
// the server and desktop parts Kiln meets, with the names newer LLVMs give CPUs that
// LLVM 16 does not know (Zen 5); CPUs it does not list get an ISA level.
std::string named_x86_cpu(const X86Id &id) {
  if (id.vendor == "AuthenticAMD") {
    if (id.family == 0x17) return id.model >= 0x30 ? "znver2" : "znver1";
    if (id.family == 0x19) return (id.model <= 0x0f || (id.model >= 0x20 && id.model <= 0x5f)) ? "znver3" : "znver4";
    // Zen 5: LLVM 16 does not know it and builds its code as Zen 4's (codegen), but its
    // records must not mix with Zen 4's (a full-width AVX-512 datapath, not a halved one).
    if (id.family == 0x1a) return "znver5";
    return "";
  }
  if (id.vendor != "GenuineIntel" || id.family != 6) return "";
  unsigned m = id.model;
  if (in(m, {0x3c, 0x3f, 0x45, 0x46})) return "haswell";
  if (in(m, {0x3d, 0x47, 0x4f, 0x56})) return "broadwell";
  if (in(m, {0x4e, 0x5e, 0x8e, 0x9e, 0xa5, 0xa6})) return "skylake";
  if (m == 0x55) {
    if (__builtin_cpu_supports("avx512bf16")) return "cooperlake";
    return __builtin_cpu_supports("avx512vnni") ? "cascadelake" : "skylake-avx512";
  }
  if (m == 0x66) return "cannonlake";
  if (in(m, {0x7d, 0x7e})) return "icelake-client";
  if (in(m, {0x6a, 0x6c})) return "icelake-server";
  if (in(m, {0x8c, 0x8d})) return "tigerlake";
  if (m == 0xa7) return "rocketlake";
  if (m == 0x8f) return "sapphirerapids";
  if (m == 0xcf) return "emeraldrapids";
  if (in(m, {0xad, 0xae})) return "graniterapids";
  if (in(m, {0x97, 0x9a})) return "alderlake";
  if (in(m, {0xb7, 0xba, 0xbf})) return "raptorlake";
  if (in(m, {0xaa, 0xac})) return "meteorlake";
  return "";
}

// The x86-64 microarchitecture level the host implements, from its cpuid flags.
std::string x86_isa_level() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    return "x86-64-v4";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    return "x86-64-v3";
  if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt")) return "x86-64-v2";
  return "x86-64";
}

std::string detect_host_cpu() {
  std::string named = named_x86_cpu(read_x86_id());
  std::string level = x86_isa_level();
  // A virtual machine may hide AVX-512 from a CPU that has it (or the table may be
  // wrong for a new stepping): then the name would promise instructions the host
  // cannot run, and the ISA level is the honest answer.
  if (named.empty() || x86_vector_bits(named) != x86_vector_bits(level)) return level;
  return named;
}
#endif

}  // namespace

std::string aarch64_cpu_from_cpuinfo(std::istream &cpuinfo) {
  std::string line, implementer, part;
  while (std::getline(cpuinfo, line)) {
    auto value = [&] { return line.substr(line.find(':') + 1); };
    if (line.rfind("CPU implementer", 0) == 0 && implementer.empty()) implementer = value();
    if (line.rfind("CPU part", 0) == 0 && part.empty()) part = value();
  }
  auto number = [](const std::string &s) {
    try {
      return s.empty() ? 0ul : std::stoul(s, nullptr, 0);
    } catch (const std::exception &) {
      return 0ul;
    }
  };
  // NVIDIA's Carmel (Jetson Xavier): its own design, which LLVM models.
  if (number(implementer) == 0x4e && number(part) == 0x004) return "carmel";
  if (number(implementer) != 0x41)  // other Arm Ltd. designs; the rest get the generic model
    return "generic";
  switch (number(part)) {
    case 0xd03:
      return "cortex-a53";
    case 0xd04:
      return "cortex-a35";
    case 0xd05:
      return "cortex-a55";
    case 0xd07:
      return "cortex-a57";
    case 0xd08:
      return "cortex-a72";
    case 0xd09:
      return "cortex-a73";
    case 0xd0a:
      return "cortex-a75";
    case 0xd0b:
      return "cortex-a76";
    case 0xd0c:
      return "neoverse-n1";
    case 0xd0d:
      return "cortex-a77";
    case 0xd40:
      return "neoverse-v1";
    case 0xd41:
      return "cortex-a78";
    case 0xd42:
      return "cortex-a78";  // Cortex-A78AE (Jetson Orin)
    case 0xd44:
      return "cortex-x1";
    case 0xd46:
      return "cortex-a510";
    case 0xd47:
      return "cortex-a710";
    case 0xd48:
      return "cortex-x2";
    case 0xd49:
      return "neoverse-n2";
    case 0xd4b:
      return "cortex-a78c";
    case 0xd4f:
      return "neoverse-v2";
    default:
      return "generic";
  }
}

namespace {

#if defined(__aarch64__)
std::string detect_host_cpu() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  return aarch64_cpu_from_cpuinfo(cpuinfo);
}
#elif !defined(__x86_64__)
std::string detect_host_cpu() { return "generic"; }
#endif

struct HostCpu {
  std::string name;
  bool stand_in = false;
};

// KILN_HOST_CPU takes the host for another CPU whose code it runs, as oneDNN's
// ONEDNN_MAX_CPU_ISA holds oneDNN to an ISA: AVX2 code paths (8 lanes, 16 vector
// registers) are then built, tuned and tested on an AVX-512 host. A CPU with wider
// vectors than the host's would build code the host cannot run, so it is refused.
HostCpu resolve_host_cpu() {
  std::string detected = detect_host_cpu();
  const char *requested = std::getenv("KILN_HOST_CPU");
  if (requested == nullptr || *requested == '\0') return {detected, false};
  std::string named = requested;
#if defined(__x86_64__)
  if (named == "native") return {detected, false};
  if (x86_vector_bits(named) > x86_vector_bits(detected))
    throw std::invalid_argument("KILN_HOST_CPU=" + named + " asks for " + std::to_string(x86_vector_bits(named)) +
                                "-bit vectors, which this host (" + detected +
                                ") cannot run; name a CPU of its vector width or less (e.g. znver3 or "
                                "x86-64-v3 for AVX2), or unset KILN_HOST_CPU");
  return {named, true};
#else
  throw std::invalid_argument("KILN_HOST_CPU=" + named +
                              " names an x86-64 CPU to take the host for, but this host is " + host_triple() + " (" +
                              detected + "); unset KILN_HOST_CPU");
#endif
}

const HostCpu &resolved_host_cpu() {
  static const HostCpu cpu = resolve_host_cpu();
  return cpu;
}

}  // namespace

const std::string &host_cpu() { return resolved_host_cpu().name; }

bool host_cpu_stands_in() { return resolved_host_cpu().stand_in; }

}  // namespace kiln
