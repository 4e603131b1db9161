#include "device/cuda_artifact.h"
#include "support/json_read.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace kiln::device {

int64_t CudaArtifactBuffer::bytes() const {
  int64_t n = ir::dtype_bytes(dtype);
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string &what) { throw std::invalid_argument("CUDA artifact: " + what); }

const json &field(const json &j, const char *key, json::value_t type, const std::string &where) {
  auto it = j.find(key);
  if (it == j.end()) bad(where + " has no \"" + key + "\"");
  bool ok = it->type() == type || (type == json::value_t::number_integer && it->is_number_unsigned());
  if (!ok) bad(where + "'s \"" + key + "\" has the wrong type");
  return *it;
}

int64_t positive(const json &j, const std::string &where, int64_t most) {
  if (!j.is_number_integer() && !j.is_number_unsigned()) bad(where + " is not a whole number");
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(most)) bad(where + " is too large");
  int64_t v = j.get<int64_t>();
  if (v < 1 || v > most) bad(where + " must be in [1, " + std::to_string(most) + "], not " + std::to_string(v));
  return v;
}

std::array<int64_t, 3> dims(const json &j, const std::string &where, int64_t most) {
  if (!j.is_array() || j.size() != 3) bad(where + " must be three numbers");
  return {positive(j[0], where, most), positive(j[1], where, most), positive(j[2], where, most)};
}

}  // namespace

CudaArtifact parse_cuda_artifact(const std::string &text) {
  json j = kiln::support::parse_json_or_discarded(text);
  if (j.is_discarded() || !j.is_object()) bad("not a JSON object");
  const json &version = field(j, "kiln_cuda_artifact", json::value_t::number_integer, "the artifact");
  if (version.get<int64_t>() != KILN_CUDA_ARTIFACT_VERSION)
    bad("format version " + version.dump() + ", this Kiln reads " + std::to_string(KILN_CUDA_ARTIFACT_VERSION));
  CudaArtifact a;
  a.name = field(j, "name", json::value_t::string, "the artifact").get<std::string>();
  a.target = field(j, "target", json::value_t::string, "the artifact").get<std::string>();
  a.arch = field(j, "arch", json::value_t::string, "the artifact").get<std::string>();
  a.ptx_isa = field(j, "ptx_isa", json::value_t::string, "the artifact").get<std::string>();
  a.ptx = field(j, "ptx", json::value_t::string, "the artifact").get<std::string>();
  if (auto hex = j.find("cubin_hex"); hex != j.end()) {
    if (!hex->is_string() || hex->get_ref<const std::string &>().size() % 2 != 0)
      bad("\"cubin_hex\" is not an even number of hexadecimal digits");
    const std::string &digits = hex->get_ref<const std::string &>();
    auto value = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      bad("\"cubin_hex\" holds '" + std::string(1, c) + "', not a lowercase hexadecimal digit");
    };
    a.cubin.reserve(digits.size() / 2);
    for (size_t i = 0; i < digits.size(); i += 2)
      a.cubin.push_back(static_cast<char>(value(digits[i]) * 16 + value(digits[i + 1])));
    a.cubin_toolkit = field(j, "cubin_toolkit", json::value_t::string, "the artifact").get<std::string>();
  }
  constexpr int64_t kMaxBytes = int64_t{1} << 40;
  for (const json &b : field(j, "buffers", json::value_t::array, "the artifact")) {
    if (!b.is_object()) bad("a buffer is not an object");
    CudaArtifactBuffer buf;
    buf.name = field(b, "name", json::value_t::string, "a buffer").get<std::string>();
    std::string where = "buffer '" + buf.name + "'";
    try {
      buf.dtype = ir::parse_dtype(field(b, "dtype", json::value_t::string, where).get<std::string>());
    } catch (const std::invalid_argument &e) {
      bad(where + ": " + e.what());
    }
    int64_t elements = 1;
    for (const json &d : field(b, "shape", json::value_t::array, where)) {
      int64_t e = positive(d, where + "'s dimension", kMaxBytes);
      if (elements > kMaxBytes / e) bad(where + " is larger than 1 TiB");
      elements *= e;
      buf.shape.push_back(e);
    }
    if (elements > kMaxBytes / 8) bad(where + " is larger than 1 TiB");
    buf.role = field(b, "role", json::value_t::string, where).get<std::string>();
    if (buf.role != "input" && buf.role != "output" && buf.role != "scratch")
      bad(where + " has role '" + buf.role + "'; expected input, output or scratch");
    a.buffers.push_back(std::move(buf));
  }
  for (const json &l : field(j, "launches", json::value_t::array, "the artifact")) {
    if (!l.is_object()) bad("a launch is not an object");
    CudaArtifactLaunch launch;
    launch.name = field(l, "name", json::value_t::string, "a launch").get<std::string>();
    std::string where = "launch '" + launch.name + "'";
    launch.grid = dims(field(l, "grid", json::value_t::array, where), where + "'s grid", 2147483647);
    launch.block = dims(field(l, "block", json::value_t::array, where), where + "'s block", 1024);
    const json &shared = field(l, "shared_bytes", json::value_t::number_integer, where);
    if (shared.is_number_unsigned() ? shared.get<uint64_t>() > (1u << 20)
                                    : shared.get<int64_t>() < 0 || shared.get<int64_t>() > (1 << 20))
      bad(where + "'s shared_bytes is outside [0, 1 MiB]");
    launch.shared_bytes = shared.get<int64_t>();
    if (a.ptx.find(".entry " + launch.name + "(") == std::string::npos) bad(where + " names no kernel of the PTX");
    a.launches.push_back(std::move(launch));
  }
  if (a.launches.empty()) bad("no launches");
  return a;
}

CudaArtifact read_cuda_artifact(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read CUDA artifact " + path);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_cuda_artifact(text.str());
  } catch (const std::invalid_argument &e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace kiln::device
