// Target strings (--target, records read back from a database): any text is refused
// with a clear error or parses to a target whose canonical form reads back the same.
// Also /proc/cpuinfo texts, which name an AArch64 host's CPU.
#include <sstream>
#include <stdexcept>

#include "target/target.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(target_string) {
  // The same bytes as an AArch64 board's /proc/cpuinfo: the CPU named from it must be
  // one a target takes.
  std::istringstream cpuinfo(input);
  const std::string cpu = kiln::aarch64_cpu_from_cpuinfo(cpuinfo);
  if (kiln::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=" + cpu).mcpu != cpu)
    throw std::logic_error("the CPU named from a cpuinfo does not parse as a target: " + cpu);
  // Its flags, as the features matrix instructions follow: each one a target takes.
  std::istringstream flags(input);
  for (const std::string &feature : kiln::cpu_features_from_cpuinfo(flags))
    if (!kiln::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=generic -mattr=+" + feature).has_feature(feature))
      throw std::logic_error("a feature read from a cpuinfo is not one a target takes: " + feature);
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
