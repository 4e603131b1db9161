// What the tracker's and the runner's flags and files give them: HOST:PORT addresses,
// keys and ids, tracker:// URIs and token files. The first byte picks the parser, the rest
// is its input; each refuses with its documented exception or gives a value that keeps
// the parser's promises.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "rpc/connection.h"
#include "rpc/remote_runner.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

void check(bool promise, const char *what) {
  if (!promise) throw std::logic_error(what);
}

void host_port(const std::string &text) {
  kiln::rpc::HostPort hp;
  try {
    hp = kiln::rpc::parse_host_port(text, "--tracker", /*allow_any_port=*/text.size() % 2 == 0);
  } catch (const std::invalid_argument &) {
    return;
  }
  check(!hp.host.empty() && hp.port >= 0 && hp.port <= 65535, "an address outside its promise was accepted");
  check(kiln::rpc::parse_host_port(hp.host + ":" + std::to_string(hp.port), "--listen", true).port == hp.port,
        "an accepted address does not read back");
}

void name(const std::string &text) {
  bool all = !text.empty() && text.size() <= kiln::rpc::kMaxNameBytes;
  for (char c : text) all = all && kiln::rpc::is_name_char(c);
  check(kiln::rpc::why_not_a_name(text).empty() == all, "why_not_a_name disagrees with the alphabet");
}

void tracker_uri(const std::string &text) {
  try {
    kiln::rpc::TrackerUri uri = kiln::rpc::parse_tracker_uri(text);
    check(kiln::rpc::why_not_a_name(uri.key).empty(), "a tracker URI with a bad key was accepted");
  } catch (const std::invalid_argument &) {
  }
}

void token_file(const std::string &bytes) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln-token-fuzz-" + std::to_string(getpid()));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  // Private, as token files must be: the bytes decide the rest.
  std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::string token;
  try {
    token = kiln::rpc::read_token_file(path);
  } catch (const std::runtime_error &) {
    return;
  }
  check(!token.empty() && token.size() <= kiln::rpc::kMaxTokenBytes, "a token of a refused length was accepted");
  for (char c : token) check(c >= 0x21 && c <= 0x7e, "a token with a byte gRPC cannot send was accepted");
}

}  // namespace

KILN_FUZZ_TARGET(rpc_inputs) {
  if (input.empty()) return;
  const std::string rest = input.substr(1);
  switch (static_cast<unsigned char>(input[0]) % 4) {
    case 0:
      return host_port(rest);
    case 1:
      return name(rest);
    case 2:
      return tracker_uri(rest);
    default:
      return token_file(rest);
  }
}
