// `kiln export`: a tuned kernel for another program to link. The best record of a
// workload in a database, built into a relocatable object whose functions carry a name
// of the caller's choosing, and a C header declaring them with their parameters
// (order, dtypes, shapes, alignment), the prepack function for weights the program
// reads packed, and the runtime functions it calls (the threading hooks).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kiln::executor {

/// Something the caller can fix: no such database, workload or record, a bad name.
struct ExportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// The request itself is wrong: a workload, target or symbol that does not parse.
struct ExportBadRequest : ExportError {
  using ExportError::ExportError;
};
/// The database holds no usable record of the workload for the target.
struct ExportNotFound : ExportError {
  using ExportError::ExportError;
};

struct ExportRequest {
  std::string db_path;
  std::string workload;  ///< the 64-hex workload key hash, or the workload's JSON
  std::string target;    ///< a CPU target; records of the same device kind serve when it has none
  std::string symbol;    ///< the kernel's C name; empty: kiln_ and the workload's operators
};

struct ExportedKernel {
  std::string symbol;
  std::string object;  ///< ELF relocatable object
  std::string header;  ///< C header declaring `symbol` and its helpers
  std::string workload_hash, summary, target;
  int64_t record_id = 0;
  double latency_seconds = 0;
  bool exact_target = true;  ///< false: a record of another CPU of the same kind
  bool has_prepack = false;
};

/// Looks the workload up and builds its best record; throws ExportNotFound or
/// ExportError with what to do.
ExportedKernel export_kernel(const ExportRequest &request);

/// Writes the object and the header (each written beside itself and renamed into place).
void write_exported_kernel(const ExportedKernel &kernel, const std::string &object_path,
                           const std::string &header_path);

}  // namespace kiln::executor
