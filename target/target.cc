// Target string parsing and the hardware facts derived from it.

#include "target/target.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "target/cuda_arch.h"

namespace kiln {

static constexpr int kCudaDefaultMaxThreadsPerBlock = 1024;
static constexpr int64_t kCudaDefaultSharedMemoryBytes = 48 * 1024;

std::string host_triple() {
#if defined(__x86_64__)
  return "x86_64-linux-gnu";
#elif defined(__aarch64__)
  return "aarch64-linux-gnu";
#else
  return "unknown-linux-gnu";
#endif
}

// The first component of a triple is the architecture ("x86_64-linux-gnu").
static std::string triple_arch(const std::string &triple) { return triple.substr(0, triple.find('-')); }

int x86_vector_bits(std::string_view mcpu) {
  // CPUs (LLVM -mcpu names) whose vector registers are 512 bits wide.
  static constexpr std::array<std::string_view, 17> kAvx512Cpus = {"skylake-avx512",
                                                                   "cascadelake",
                                                                   "cooperlake",
                                                                   "cannonlake",
                                                                   "icelake-client",
                                                                   "icelake-server",
                                                                   "tigerlake",
                                                                   "rocketlake",
                                                                   "sapphirerapids",
                                                                   "emeraldrapids",
                                                                   "graniterapids",
                                                                   "znver4",
                                                                   "znver5",
                                                                   "knl",
                                                                   "knm",
                                                                   "x86-64-v4",
                                                                   "alderlake-avx512"};
  if (mcpu == "native") return 0;
  if (mcpu == "skx") return 512;
  return std::find(kAvx512Cpus.begin(), kAvx512Cpus.end(), mcpu) != kAvx512Cpus.end() ? 512 : 256;
}

static int parse_positive_int(std::string_view flag, std::string_view value, std::string_view text) {
  int64_t parsed = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || end != value.data() + value.size() || parsed <= 0 || parsed > (1LL << 31) - 1)
    throw std::invalid_argument("flag '-" + std::string(flag) + "' in target '" + std::string(text) +
                                "' needs a positive integer, got '" + std::string(value) + "'");
  return static_cast<int>(parsed);
}

// Splits "-name=value" tokens into a map, rejecting anything else and repeats.
static std::map<std::string, std::string> parse_flags(const std::vector<std::string_view> &tokens,
                                                      std::string_view text) {
  std::map<std::string, std::string> flags;
  for (std::string_view token : tokens) {
    size_t eq = token.find('=');
    if (token.size() < 2 || token[0] != '-' || eq == std::string_view::npos || eq == 1 || eq + 1 == token.size())
      throw std::invalid_argument("bad flag '" + std::string(token) + "' in target '" + std::string(text) +
                                  "'; flags look like -name=value");
    std::string name(token.substr(1, eq - 1));
    // CPU names, triples and numbers are short; capping each value keeps the canonical
    // form of any accepted target within the length parse() accepts, so it reads back.
    constexpr size_t kMaxFlagValueLength = 128;
    if (token.size() - eq - 1 > kMaxFlagValueLength)
      throw std::invalid_argument("flag '-" + name + "' has a value of " + std::to_string(token.size() - eq - 1) +
                                  " characters; at most " + std::to_string(kMaxFlagValueLength) +
                                  " are accepted (e.g. -mcpu=znver4)");
    if (!flags.emplace(name, std::string(token.substr(eq + 1))).second)
      throw std::invalid_argument("flag '-" + name + "' is given twice in target '" + std::string(text) + "'");
  }
  return flags;
}

static std::vector<std::string_view> split_whitespace(std::string_view text) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

static void reject_unknown_flags(const std::map<std::string, std::string> &flags,
                                 std::initializer_list<std::string_view> known, std::string_view kind,
                                 std::string_view text) {
  for (const auto &[name, value] : flags) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    std::string expected;
    for (std::string_view k : known) expected += (expected.empty() ? "-" : ", -") + std::string(k);
    throw std::invalid_argument("bad flag '-" + name + "' in target '" + std::string(text) + "'; " + std::string(kind) +
                                " accepts " + expected);
  }
}

// "+avx512bf16,-amx-tile" as LLVM spells features: each + or - and a name; sorted and
// without repeats, so that one set of features is one target string.
static std::vector<std::string> parse_mattr(const std::string &value, std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool well_formed = item.size() >= 2 && (item[0] == '+' || item[0] == '-');
    for (size_t i = 1; well_formed && i < item.size(); ++i) {
      char c = item[i];
      well_formed = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    }
    if (!well_formed)
      throw std::invalid_argument("target '" + std::string(text) + "': -mattr takes features as LLVM writes them, " +
                                  "each + or - and a lowercase name, separated by commas (e.g. " +
                                  "-mattr=+avx512bf16,+amx-bf16), not '" + item + "'");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].substr(1) == out[i - 1].substr(1))
      throw std::invalid_argument("target '" + std::string(text) + "': -mattr both adds and removes '" +
                                  out[i].substr(1) + "'");
  return out;
}

static Target parse_llvm(const std::map<std::string, std::string> &flags, std::string_view text, NativeCpu native_cpu) {
  reject_unknown_flags(flags, {"mtriple", "mcpu", "num-cores", "mattr"}, "llvm", text);
  Target t;
  t.kind = "llvm";
  auto get = [&](const char *name) -> const std::string * {
    auto it = flags.find(name);
    return it == flags.end() ? nullptr : &it->second;
  };
  t.mtriple = get("mtriple") ? *get("mtriple") : host_triple();
  bool host = t.mtriple == host_triple();
  std::string requested = get("mcpu") ? *get("mcpu") : (host ? "native" : "generic");
  bool native = requested == "native";
  if (native && !host && native_cpu == NativeCpu::kResolve)
    throw std::invalid_argument("target '" + std::string(text) + "' asks for -mcpu=native on '" + t.mtriple +
                                "', which is not this host (" + host_triple() + "); name the CPU");
  t.mcpu = native && native_cpu == NativeCpu::kResolve ? host_cpu() : requested;
  if (get("num-cores"))
    t.num_cores = parse_positive_int("num-cores", *get("num-cores"), text);
  else if (host && native)
    t.num_cores = std::max(1u, std::thread::hardware_concurrency());
  else
    t.num_cores = 1;
  if (get("mattr")) t.mattr = parse_mattr(*get("mattr"), text);

  if (t.is_aarch64())
    t.vector_width_bits = 128;  // NEON; SVE widths vary per chip and are not modelled yet
  else if (t.is_x86())
    t.vector_width_bits = x86_vector_bits(native ? host_cpu() : t.mcpu);
  else
    t.vector_width_bits = 256;
  return t;
}

static Target parse_cuda(const std::map<std::string, std::string> &flags, std::string_view text, NativeCpu stored) {
  reject_unknown_flags(flags, {"arch", "max-threads-per-block", "max-shared-memory-per-block", "sm-count", "l2-bytes"},
                       "cuda", text);
  Target t;
  t.kind = "cuda";
  // Without -arch, `cuda` is the device present (as `native` is the host CPU), named by
  // its concrete arch and, where it differs from the arch's typical board, its size.
  std::map<std::string, std::string> given = flags;
  if (!given.count("arch")) {
    std::string why;
    std::optional<CudaDevice> device =
        stored == NativeCpu::kResolve ? detect_cuda_device(&why) : std::optional<CudaDevice>();
    if (!device)
      throw std::invalid_argument("cuda target '" + std::string(text) + "' needs -arch=sm_XY, e.g. -arch=sm_90" +
                                  (why.empty() ? std::string() : ", or a CUDA device present: " + why));
    given["arch"] = device->arch;
    if (!given.count("sm-count")) given["sm-count"] = std::to_string(device->sm_count);
    if (!given.count("l2-bytes")) given["l2-bytes"] = std::to_string(device->l2_bytes);
  }
  const std::string a = given.at("arch");
  bool well_formed = a.size() > 3 && a.compare(0, 3, "sm_") == 0 &&
                     std::all_of(a.begin() + 3, a.end(), [](char c) { return std::isalnum((unsigned char)c); });
  if (!well_formed)
    throw std::invalid_argument("bad -arch '" + a + "' in target '" + std::string(text) + "'; expected sm_XY");
  t.arch = a;
  // A stored record of an arch this Kiln has no facts for (another tool's, or a later
  // Kiln's) still reads back, with its facts unknown (0); a user's target must be known.
  static constexpr CudaArchFacts kUnknown{
      "", 32, 1024, 0, 0, kCudaDefaultSharedMemoryBytes, kCudaDefaultSharedMemoryBytes, 0, 0, 0, "", 0, 0};
  const CudaArchFacts *facts = find_cuda_arch(a);
  if (!facts && stored == NativeCpu::kKeepAsStored) facts = &kUnknown;
  if (!facts) {
    std::string known;
    for (const std::string &k : known_cuda_archs()) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument("unknown -arch '" + a + "' in target '" + std::string(text) +
                                "'; Kiln knows the limits of " + known);
  }
  t.warp_size = facts->warp_size;
  t.max_threads_per_sm = facts->max_threads_per_sm;
  t.max_blocks_per_sm = facts->max_blocks_per_sm;
  t.max_shared_memory_optin_bytes = facts->shared_per_block_optin;
  t.registers_per_sm = facts->registers_per_sm;
  t.shared_memory_per_sm_bytes = facts->shared_per_sm;
  t.max_registers_per_thread = facts->max_registers_per_thread;
  auto sms = given.find("sm-count");
  t.sm_count = sms == given.end() ? facts->sm_count : parse_positive_int("sm-count", sms->second, text);
  auto l2 = given.find("l2-bytes");
  t.l2_bytes = l2 == given.end() ? facts->l2_bytes : parse_positive_int("l2-bytes", l2->second, text);
  auto threads = flags.find("max-threads-per-block");
  t.max_threads_per_block = threads == flags.end() ? kCudaDefaultMaxThreadsPerBlock
                                                   : parse_positive_int("max-threads-per-block", threads->second, text);
  auto shared = flags.find("max-shared-memory-per-block");
  t.max_shared_memory_bytes = shared == flags.end()
                                  ? kCudaDefaultSharedMemoryBytes
                                  : parse_positive_int("max-shared-memory-per-block", shared->second, text);
  if (t.max_threads_per_block > facts->max_threads_per_block)
    throw std::invalid_argument("-max-threads-per-block=" + std::to_string(t.max_threads_per_block) + " in target '" +
                                std::string(text) + "' exceeds " + a + "'s " +
                                std::to_string(facts->max_threads_per_block));
  if (t.max_shared_memory_bytes > facts->shared_per_block_optin)
    throw std::invalid_argument("-max-shared-memory-per-block=" + std::to_string(t.max_shared_memory_bytes) +
                                " in target '" + std::string(text) + "' exceeds what " + a +
                                " gives a block even with the opt-in (" +
                                std::to_string(facts->shared_per_block_optin) + " bytes)");
  t.vector_width_bits = 128;  // widest global load a thread issues (float4)
  return t;
}

Target Target::parse(std::string_view text, NativeCpu native_cpu) {
  // Real targets are a few dozen characters; refusing long ones keeps every message
  // below from quoting megabytes back.
  constexpr size_t kMaxTargetLength = 1024;
  if (text.size() > kMaxTargetLength) {
    throw std::invalid_argument("the target string is " + std::to_string(text.size()) + " characters long; at most " +
                                std::to_string(kMaxTargetLength) + " are accepted (e.g. 'llvm -mcpu=znver4')");
  }
  std::vector<std::string_view> tokens = split_whitespace(text);
  if (tokens.empty())
    throw std::invalid_argument("empty target string; expected e.g. 'llvm -mcpu=native' or 'cuda -arch=sm_90'");
  std::string_view kind = tokens.front();
  tokens.erase(tokens.begin());
  std::map<std::string, std::string> flags = parse_flags(tokens, text);
  if (kind == "llvm") return parse_llvm(flags, text, native_cpu);
  if (kind == "cuda") return parse_cuda(flags, text, native_cpu);
  throw std::invalid_argument("unknown target kind '" + std::string(kind) + "'; expected llvm or cuda");
}

std::string Target::str() const {
  std::string out = kind;
  if (is_llvm()) {
    std::string features;
    for (const std::string &f : mattr) features += (features.empty() ? "" : ",") + f;
    return out + (features.empty() ? "" : " -mattr=" + features) + " -mcpu=" + mcpu + " -mtriple=" + mtriple +
           " -num-cores=" + std::to_string(num_cores);
  }
  out += " -arch=" + arch;
  if (max_shared_memory_bytes != kCudaDefaultSharedMemoryBytes)
    out += " -max-shared-memory-per-block=" + std::to_string(max_shared_memory_bytes);
  if (max_threads_per_block != kCudaDefaultMaxThreadsPerBlock)
    out += " -max-threads-per-block=" + std::to_string(max_threads_per_block);
  // The board's size only where it differs from the arch's typical one, so that
  // `cuda -arch=sm_90` stays the key it always was.
  const CudaArchFacts *facts = find_cuda_arch(arch);
  if (l2_bytes != (facts ? facts->l2_bytes : 0)) out += " -l2-bytes=" + std::to_string(l2_bytes);
  if (sm_count != (facts ? facts->sm_count : 0)) out += " -sm-count=" + std::to_string(sm_count);
  return out;
}

std::string Target::device_kind() const {
  if (is_cuda()) return "cuda";
  return "cpu-" + triple_arch(mtriple);
}

std::string Target::device_model() const { return is_cuda() ? arch : mcpu; }

bool Target::is_x86() const {
  std::string a = triple_arch(mtriple);
  return is_llvm() && (a == "x86_64" || a == "i686" || a == "i386");
}

bool Target::is_aarch64() const {
  std::string a = triple_arch(mtriple);
  return is_llvm() && (a == "aarch64" || a == "arm64");
}

}  // namespace kiln
