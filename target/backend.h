// One backend object per kind of target (x86-64 CPU, AArch64 CPU, CUDA GPU): the home of
// the per-target facts every later layer decides on — register files, the matrix
// instructions it offers, what its compiled artifacts are, whether this host can run
// them, the PTX ISA a CUDA arch takes. Code outside target/ asks `target.backend()`
// rather than testing the target's kind; where a layer needs its own per-backend piece
// (search rules, code generation, runners), it switches on `backend().kind()` once, in
// one function, and the compiler's -Wswitch names every such function when a kind is
// added (docs/DESIGN.md, "Adding a target").
#pragma once

#include <string>
#include <vector>

#include "target/target.h"

namespace kiln {

enum class BackendKind {
  kX86Cpu,      ///< llvm, x86_64 triples
  kAArch64Cpu,  ///< llvm, aarch64 triples
  kOtherCpu,    ///< llvm, any other triple LLVM builds for (code is built, not tuned for)
  kCuda,        ///< cuda -arch=sm_XY
};

/// A matrix (tensor) instruction: one instruction that multiplies an m×k tile by a k×n
/// tile into an m×n accumulator tile. What the tensorization of schedules maps onto.
struct MatrixInstruction {
  std::string name;               ///< e.g. "avx512_vnni.vpdpbusd", "amx.tdpbf16ps", "mma.sync.m16n8k16"
  std::string feature;            ///< the CPU feature or arch that provides it ("avx512_vnni", "sm_80")
  std::string input_dtype;        ///< "bfloat16", "uint8", ...
  std::string accumulator_dtype;  ///< "float32", "int32"
  int m = 0, n = 0, k = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  /// In messages: "x86-64 CPU", "AArch64 CPU", "CUDA GPU".
  virtual const char *name() const = 0;
  /// Whether its programs run as GPU kernels (thread bindings, shared memory) rather
  /// than as CPU loop nests.
  virtual bool is_gpu() const = 0;
  /// What a built program is: a shared library (".so") or a GPU artifact (".cuda.json").
  virtual const char *artifact_extension() const = 0;
  /// Whether `kiln compile --choose-in-model` can time programs inside the model here.
  virtual bool chooses_programs_in_model() const { return !is_gpu(); }

  /// CPU: vector registers in the register file (16 on AVX2, 32 on AVX-512 and AArch64).
  virtual int vector_registers(const Target &target) const;
  /// CPU: the vector registers a register tile may hold as accumulators: the file less
  /// those the loads and broadcasts of each step need.
  virtual int accumulator_registers(const Target &target) const;
  /// The matrix instructions `target` offers, by its features (Target::has_feature):
  /// AMX, AVX512-BF16, AVX512-VNNI and AVX-VNNI on x86; SMMLA, BFMMLA and SDOT on
  /// AArch64; none yet on CUDA (Tensor Cores come with their tensorization).
  virtual std::vector<MatrixInstruction> matrix_instructions(const Target &target) const;
  /// Why this host cannot run code built for `target` (another architecture or operating
  /// system, a GPU, wider vectors than this host's), or empty when it can.
  virtual std::string why_this_host_cannot_run(const Target &target) const = 0;
  /// CUDA: the PTX ISA version the arch's code is written in ("7.8"); throws
  /// std::invalid_argument elsewhere.
  virtual std::string ptx_isa(const Target &target) const;
};

/// The backend of a target's kind. The objects live as long as the program.
const Backend &backend_of(const Target &target);

}  // namespace kiln
