// How Kiln's processes reach the tracker: channels with keepalive and reconnect
// backoff, optional TLS, and the shared token sent with every call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::rpc {

/// Blobs travel in chunks of this size, well under gRPC's 4 MiB message cap.
constexpr size_t kBlobChunkBytes = size_t{1} << 20;
/// Messages the tracker accepts; a blob's chunks and every other message fit.
constexpr int kMaxMessageBytes = 4 << 20;

struct ClientOptions {
  /// host:port of the tracker.
  std::string address;
  /// Sent as `authorization: Bearer <token>`; empty: none.
  std::string token;
  /// PEM of the CA that signed the tracker's certificate; empty: plaintext, which
  /// make_channel only allows towards a loopback address.
  std::string tls_ca_pem;
  /// Plaintext towards a non-loopback address (the token travels in the clear).
  bool insecure = false;
  /// Upper bound of the reconnect backoff.
  std::chrono::milliseconds max_reconnect_backoff{5000};
};

/// Reads a token file: its first line, surrounding blanks removed. Throws
/// std::runtime_error with a message for a missing, unreadable or empty file, a first
/// line longer than kMaxTokenBytes (read no further: /dev/zero ends nowhere) and a token
/// with bytes outside visible ASCII, which gRPC refuses to send in a header, and a file
/// its group or others may read (the message says to chmod 600 it): a token is the key
/// to run code on every board, or to report any latency.
std::string read_token_file(const std::filesystem::path &path);
constexpr size_t kMaxTokenBytes = 4096;

/// A parsed HOST:PORT ("[::1]:9190" gives host "[::1]").
struct HostPort {
  std::string host;
  int port = 0;
};
/// Parses HOST:PORT, with a bracketed IPv6 host; throws std::invalid_argument naming
/// `what` (the flag) for anything else, a port outside 1..65535 (0 too when
/// `allow_any_port`: a server's "any free port") or a host with characters no host name
/// or address has. gRPC itself takes "host:" as port 443 and "host:99999" as another port.
HostPort parse_host_port(const std::string &text, const std::string &what, bool allow_any_port = false);

/// Device keys, runner ids and session ids: 1 to kMaxNameBytes of letters, digits, '.',
/// '_' and '-' (they end tracker:// URIs and are printed by `kiln tracker status`).
constexpr size_t kMaxNameBytes = 128;
/// "" when `name` is a valid key or id, else why not (without naming what it is).
std::string why_not_a_name(std::string_view name);
/// The characters of keys and ids; host names use them too.
inline bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}
/// Reads a PEM file (certificate, key) whole; throws naming the file.
std::string read_pem_file(const std::filesystem::path &path, const char *what);

/// True for 127.0.0.0/8, ::1 and "localhost" (host part of host:port).
bool is_loopback_address(const std::string &address);

/// Throws std::runtime_error when the options ask for plaintext towards a non-loopback
/// address without `insecure`.
std::shared_ptr<grpc::Channel> make_channel(const ClientOptions &options);

/// A context for one call: the token and a deadline (none for 0).
std::unique_ptr<grpc::ClientContext> make_context(const ClientOptions &options, double timeout_seconds);

/// Who may make a tracker call: tuners submit jobs (and upload their artifacts, read
/// their results); runners take jobs, fetch artifacts and report results. Each role has
/// its own token, so a board's token cannot send code to the other boards and a tuner's
/// cannot pose as a board.
enum class Role { kSubmitter, kRunner };

/// The token each role must present; both empty: no token needed (loopback, or
/// --insecure); one empty alone: nobody is admitted to that role. The same token for
/// both is one token for everything.
struct RoleTokens {
  std::string submitter, runner;
  const std::string &of(Role role) const { return role == Role::kSubmitter ? submitter : runner; }
};

/// Server side: OK when `context` carries the token of `role` (any role's when `role`
/// is empty); UNAUTHENTICATED when it carries none or an unknown one, PERMISSION_DENIED
/// when it carries the other role's, each with a message saying which token to give.
/// Compared in constant time.
grpc::Status check_role(const grpc::ServerContextBase &context, const RoleTokens &tokens, std::optional<Role> role);

/// "host:port: <status message> (<code name>)", for error messages.
std::string describe(const grpc::Status &status);

}  // namespace kiln::rpc
