// ptxas -v output, as a newer or older toolkit may print it: any text gives reports
// with non-negative figures, never an exception or a crash.
#include <stdexcept>

#include "codegen/ptxas.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(ptxas_report) {
  for (const kiln::codegen::PtxasKernelReport &r : kiln::codegen::parse_ptxas_report(input)) {
    if (r.name.empty() || r.registers < 0 || r.shared_bytes < 0 || r.stack_bytes < 0 || r.spill_store_bytes < 0 ||
        r.spill_load_bytes < 0)
      throw std::logic_error("a ptxas report with an empty name or a negative figure");
  }
}
