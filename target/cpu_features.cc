// Which CPU features a target's code may use: the ones a CPU name implies (for the
// features matrix instructions need), -mattr, and this host's /proc/cpuinfo flags.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "target/target.h"

namespace kiln {
namespace {

// The matrix-instruction features of CPUs by LLVM name (LLVM 16's X86.td / AArch64.td
// feature lists, the part of them that says which dot-product and tile instructions a
// core has). A CPU not listed implies none of them.
const std::map<std::string, std::vector<std::string>> &implied_features() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"cascadelake", {"avx512vnni"}},
      {"cooperlake", {"avx512vnni", "avx512bf16"}},
      {"icelake-client", {"avx512vnni"}},
      {"icelake-server", {"avx512vnni"}},
      {"tigerlake", {"avx512vnni"}},
      {"rocketlake", {"avx512vnni"}},
      {"alderlake", {"avxvnni"}},
      {"raptorlake", {"avxvnni"}},
      {"meteorlake", {"avxvnni"}},
      {"sapphirerapids", {"avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-bf16", "amx-int8"}},
      {"emeraldrapids", {"avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-bf16", "amx-int8"}},
      {"graniterapids",
       {"avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-bf16", "amx-int8", "amx-fp16"}},
      {"znver4", {"avx512vnni", "avx512bf16"}},
      {"znver5", {"avx512vnni", "avx512bf16", "avxvnni"}},
      {"cortex-a55", {"dotprod"}},
      {"cortex-a75", {"dotprod"}},
      {"cortex-a76", {"dotprod"}},
      {"cortex-a77", {"dotprod"}},
      {"cortex-a78", {"dotprod"}},
      {"cortex-a78c", {"dotprod"}},
      {"cortex-a710", {"dotprod", "i8mm", "bf16"}},
      {"cortex-x1", {"dotprod"}},
      {"cortex-x2", {"dotprod", "i8mm", "bf16"}},
      {"neoverse-n1", {"dotprod"}},
      {"neoverse-n2", {"dotprod", "i8mm", "bf16"}},
      {"neoverse-v1", {"dotprod", "i8mm", "bf16"}},
      {"neoverse-v2", {"dotprod", "i8mm", "bf16"}},
      {"carmel", {"dotprod"}},
  };
  return table;
}

// /proc/cpuinfo's names for the features above, as LLVM spells them.
const std::map<std::string, std::string> &cpuinfo_names() {
  static const std::map<std::string, std::string> names = {
      {"avx512_vnni", "avx512vnni"},
      {"avx512_bf16", "avx512bf16"},
      {"avx512_fp16", "avx512fp16"},
      {"avx_vnni", "avxvnni"},
      {"amx_tile", "amx-tile"},
      {"amx_bf16", "amx-bf16"},
      {"amx_int8", "amx-int8"},
      {"amx_fp16", "amx-fp16"},
      {"asimddp", "dotprod"},
      {"i8mm", "i8mm"},
      {"bf16", "bf16"},
  };
  return names;
}

const std::set<std::string> &host_flag_features() {
  static const std::set<std::string> features = [] {
    std::ifstream cpuinfo("/proc/cpuinfo");
    return cpu_features_from_cpuinfo(cpuinfo);
  }();
  return features;
}

}  // namespace

std::set<std::string> cpu_features_from_cpuinfo(std::istream &cpuinfo) {
  std::set<std::string> out;
  for (std::string line; std::getline(cpuinfo, line);) {
    // x86: "flags : fpu vme ..."; AArch64: "Features : fp asimd ...". The first CPU's.
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    for (std::string word; words >> word;) {
      auto it = cpuinfo_names().find(word);
      if (it != cpuinfo_names().end()) out.insert(it->second);
    }
    break;
  }
  return out;
}

bool Target::has_feature(std::string_view name) const {
  if (!is_llvm()) return false;
  for (const std::string &f : mattr)
    if (std::string_view(f).substr(1) == name) return f[0] == '+';
  // This host's own CPU: what its flags say, whatever its name implies (a virtual
  // machine may report a CPU name whose model lacks the host's AMX units, or hide units
  // its model has). A stand-in (KILN_HOST_CPU) is taken at its name.
  if (mtriple == host_triple() && mcpu == host_cpu() && !host_cpu_stands_in())
    return host_flag_features().count(std::string(name)) > 0;
  auto implied = implied_features().find(mcpu);
  return implied != implied_features().end() &&
         std::find(implied->second.begin(), implied->second.end(), name) != implied->second.end();
}

}  // namespace kiln
