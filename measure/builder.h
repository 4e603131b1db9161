// The builder interface: turns scheduled programs into artifacts (codegen/runtime/abi.h).
#pragma once

#include <string>
#include <vector>

#include "ir/stmt.h"
#include "measure/error_kind.h"
#include "target/target.h"

namespace kiln::measure {

struct BuildInput {
  ir::PrimFunc func;
  Target target;
  /// Names the artifact file (<work_dir>/<name>.so); characters other than letters,
  /// digits, '-', '_' and '.' become '_'. Empty: "candidate".
  std::string name;
  /// A compiled model's step: the library records its dependency on libkiln_runtime
  /// (codegen::Compiler::build_artifact). Candidates are loaded by the measurement
  /// server, which carries the runtime itself.
  bool needs_runtime_library = false;
};

struct BuildResult {
  /// The finished artifact; empty on error.
  std::string artifact_path;
  /// Wall time of the build as the pool saw it (process start to exit), not counting
  /// time spent waiting for the measurement lock.
  double build_seconds = 0;
  ErrorKind error = ErrorKind::kNone;  // none, build_error or build_timeout
  std::string message;

  bool ok() const { return error == ErrorKind::kNone; }
};

class Builder {
 public:
  virtual ~Builder() = default;
  /// One result per input, in order. Never throws for a bad candidate.
  virtual std::vector<BuildResult> build(const std::vector<BuildInput> &batch) = 0;
};

}  // namespace kiln::measure
