/// \file
/// The device a task is tuned for, parsed once from a target string such as
/// `llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -num-cores=2` or
/// `cuda -arch=sm_90`. Everything downstream asks this struct for hardware
/// facts (vector width, cores, GPU limits) instead of re-reading the string.

#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

/// A parsed target. Fields that do not apply to a kind are empty or 0.
///
/// Accepted flags:
///   llvm: -mtriple=T (default: the host triple), -mcpu=C (default: `native`
///         for the host triple, `generic` otherwise), -num-cores=N
///   cuda: -arch=sm_XY (required), -max-threads-per-block=N (default 1024),
///         -max-shared-memory-per-block=BYTES (default 49152)
///
/// Defaults chosen here, and why:
/// - num_cores defaults to std::thread::hardware_concurrency() only when the
///   target *is* this host (host triple and mcpu `native` or unset). For any
///   other CPU we cannot know the core count, so it defaults to 1: a schedule
///   tuned for 1 core is slower elsewhere but never oversubscribes a board.
/// - `-mcpu=native` is kept as the model string, not resolved to the host CPU
///   name: resolution would make the same string mean different things on
///   different hosts without saying so. Its vector width is read from the host
///   (cpuid) because code for `native` only ever runs on this host.
/// - The shared-memory default is the 48 KiB every CUDA GPU gives a block
///   without an opt-in; larger carve-outs must be requested explicitly.
struct Target {
  std::string kind;    ///< "llvm" or "cuda"
  std::string mtriple; ///< llvm only, e.g. "x86_64-linux-gnu"
  std::string mcpu;    ///< llvm only, e.g. "sapphirerapids", "native", "generic"
  std::string arch;    ///< cuda only, e.g. "sm_90"
  int num_cores = 0;   ///< llvm: cores a kernel may use; cuda: 0
  int max_threads_per_block = 0;        ///< cuda only
  int64_t max_shared_memory_bytes = 0;  ///< cuda only: per block
  int vector_width_bits = 0;            ///< SIMD register width used for vectorization

  /// Parses a target string. Throws std::invalid_argument naming the bad
  /// part, e.g. "unknown target kind 'foo'; expected llvm or cuda".
  static Target parse(std::string_view text);

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

  bool is_llvm() const { return kind == "llvm"; }
  bool is_cuda() const { return kind == "cuda"; }
  bool is_x86() const;
  bool is_aarch64() const;

  bool operator==(const Target &) const = default;
};

/// The triple of the machine running Kiln, e.g. "x86_64-linux-gnu".
std::string host_triple();

} // namespace kiln
