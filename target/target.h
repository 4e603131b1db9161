// The device a task is tuned for, parsed once from a target string such as
// `llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -num-cores=2` or
// `cuda -arch=sm_90`. Everything downstream asks this struct for hardware
// facts (vector width, cores, GPU limits) instead of re-reading the string.

#pragma once

#include <cstdint>
#include <istream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Backend;

/// A parsed target. Fields that do not apply to a kind are empty or 0.
///
/// Accepted flags:
///   llvm: -mtriple=T (default: the host triple), -mcpu=C (default: `native`
///         for the host triple, `generic` otherwise), -num-cores=N, -mattr=+F,-G
///         (CPU features beyond or taken from what -mcpu implies, LLVM's names)
///   cuda: -arch=sm_XY (one of target/cuda_arch.h's table; without it, the CUDA
///         device present, read from the driver, with its SM count and L2),
///         -max-threads-per-block=N (default 1024, at most the arch's),
///         -max-shared-memory-per-block=BYTES (default 49152, at most the arch's
///         opt-in limit), -sm-count=N and -l2-bytes=BYTES (default: the arch's
///         typical board, e.g. H100 SXM for sm_90: 132 SMs, 50 MiB)
///
/// Defaults chosen here, and why:
/// - num_cores defaults to std::thread::hardware_concurrency() only when the
///   target *is* this host (host triple and mcpu `native` or unset). For any
///   other CPU we cannot know the core count, so it defaults to 1: a schedule
///   tuned for 1 core is slower elsewhere but never oversubscribes a board.
/// - `-mcpu=native` (and no -mcpu on the host triple) is resolved to the host
///   CPU's LLVM name (host_cpu()) before anything else sees the target, so what
///   is stored and looked up names the machine: a record made on an AVX2 EPYC
///   says znver3, one made on an AVX-512 Xeon says sapphirerapids or
///   emeraldrapids. Strings read back from storage keep a `native` written by
///   older Kiln versions as it is (NativeCpu::kKeepAsStored): which machine it
///   meant is not known.
/// - The shared-memory default is the 48 KiB every CUDA GPU gives a block
///   without an opt-in; larger carve-outs must be requested explicitly.
/// What Target::parse does with `-mcpu=native`.
enum class NativeCpu {
  kResolve,       ///< user input: native means this host, named by host_cpu()
  kKeepAsStored,  ///< a string read back from storage: a legacy `native` stays unresolved
};

struct Target {
  std::string kind;     ///< "llvm" or "cuda"
  std::string mtriple;  ///< llvm only, e.g. "x86_64-linux-gnu"
  std::string mcpu;     ///< llvm only, e.g. "sapphirerapids", "generic" ("native" only as stored by old versions)
  std::string arch;     ///< cuda only, e.g. "sm_90"
  int num_cores = 0;    ///< llvm: cores a kernel may use; cuda: 0
  int max_threads_per_block = 0;        ///< cuda only
  int64_t max_shared_memory_bytes = 0;  ///< cuda only: per block, what schedules may use
  // cuda only, from the arch's facts (target/cuda_arch.h):
  int warp_size = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int64_t max_shared_memory_optin_bytes = 0;  ///< per block with the opt-in attribute
  int registers_per_sm = 0;
  int64_t shared_memory_per_sm_bytes = 0;  ///< what the blocks resident on one SM share
  int max_registers_per_thread = 0;
  int sm_count = 0;           ///< the arch's typical board unless -sm-count says otherwise
  int64_t l2_bytes = 0;       ///< the same, -l2-bytes
  int vector_width_bits = 0;  ///< SIMD register width used for vectorization
  /// llvm only: features beyond (+) or taken from (-) what the CPU name implies, as LLVM
  /// spells them ("+avx512bf16", "-amx-tile"); sorted. `-mattr=` in the string.
  std::vector<std::string> mattr;

  /// Parses a target string. Throws std::invalid_argument naming the bad
  /// part, e.g. "unknown target kind 'foo'; expected llvm or cuda".
  static Target parse(std::string_view text, NativeCpu native_cpu = NativeCpu::kResolve);

  /// Canonical form: kind, then flags sorted by name. Every llvm flag is
  /// written (num-cores may depend on the host, so it must be explicit);
  /// cuda limits are written only when they differ from the defaults, which
  /// do not depend on the host. parse(t.str()).str() == t.str().
  std::string str() const;

  /// Coarse device family used for cross-model fallback in the database:
  /// "cpu-x86_64", "cpu-aarch64", "cpu-<arch>" or "cuda".
  std::string device_kind() const;
  /// The model within the family: mcpu for llvm, arch for cuda.
  std::string device_model() const;

  /// The backend of this target's kind (target/backend.h): ask it, not the kind.
  const Backend &backend() const;

  bool is_llvm() const { return kind == "llvm"; }
  bool is_cuda() const { return kind == "cuda"; }
  bool is_x86() const;
  bool is_aarch64() const;
  /// Whether code for this target may use the CPU feature `name` (LLVM's spelling:
  /// "avx512bf16", "amx-bf16", "dotprod", "i8mm"): -mattr first; then this host's own CPU
  /// by its /proc/cpuinfo flags (a virtual machine's CPU name can understate or overstate
  /// them), any other CPU by what its name implies. Read features, not names.
  bool has_feature(std::string_view name) const;

  bool operator==(const Target &) const = default;
};

/// The triple of the machine running Kiln, e.g. "x86_64-linux-gnu".
std::string host_triple();

/// The LLVM CPU name of the machine running Kiln ("znver4", "sapphirerapids",
/// "neoverse-n1"), read from cpuid or /proc/cpuinfo. Where the model is not known,
/// or a virtual machine hides part of its ISA, the x86-64 ISA level it implements
/// ("x86-64-v3", "x86-64-v4") or "generic".
/// The environment variable KILN_HOST_CPU replaces the detected name with a CPU whose
/// code the host can run (`KILN_HOST_CPU=znver3` on an AVX-512 host: AVX2 code, built
/// for that CPU's features rather than the host's); a CPU with wider vectors than the
/// host's throws std::invalid_argument.
const std::string &host_cpu();

/// The LLVM CPU name of an AArch64 core from /proc/cpuinfo's first "CPU implementer"
/// and "CPU part": Arm's designs by part number, NVIDIA's Carmel (Jetson Xavier) as
/// "carmel", anything else "generic". How host_cpu() names an AArch64 host.
std::string aarch64_cpu_from_cpuinfo(std::istream &cpuinfo);

/// The matrix-instruction features among a /proc/cpuinfo's first "flags" (x86) or
/// "Features" (AArch64) line, in LLVM's spelling ("avx512_bf16" -> "avx512bf16",
/// "amx_tile" -> "amx-tile", "asimddp" -> "dotprod").
std::set<std::string> cpu_features_from_cpuinfo(std::istream &cpuinfo);

/// Whether host_cpu() is the CPU KILN_HOST_CPU names rather than the detected one.
bool host_cpu_stands_in();

/// Width in bits of the vector registers an x86 -mcpu name implies: 512 for
/// AVX-512 CPUs, 256 otherwise, 0 for an unresolved `native`.
int x86_vector_bits(std::string_view mcpu);

}  // namespace kiln

// Target::backend()'s result, complete wherever a Target is.
#include "target/backend.h"
