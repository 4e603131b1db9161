// Target strings (--target, records read back from a database): any text is refused
// with a clear error or parses to a target whose canonical form reads back the same.
#include <stdexcept>

#include "target/target.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(target_string) {
  for (kiln::NativeCpu native : {kiln::NativeCpu::kResolve, kiln::NativeCpu::kKeepAsStored}) {
    kiln::Target target;
    try {
      target = kiln::Target::parse(input, native);
    } catch (const std::invalid_argument &) {
      continue;
    }
    std::string canonical = target.str();
    if (kiln::Target::parse(canonical, kiln::NativeCpu::kKeepAsStored).str() != canonical) {
      throw std::logic_error("a target's canonical form does not read back as itself: " + canonical);
    }
  }
}
