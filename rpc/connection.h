// How Kiln's processes reach the tracker: channels with keepalive and reconnect
// backoff, optional TLS, and the shared token sent with every call.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

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
/// std::runtime_error with a message for a missing, unreadable or empty file.
std::string read_token_file(const std::filesystem::path &path);
/// Reads a PEM file (certificate, key) whole; throws naming the file.
std::string read_pem_file(const std::filesystem::path &path, const char *what);

/// True for 127.0.0.0/8, ::1 and "localhost" (host part of host:port).
bool is_loopback_address(const std::string &address);

/// Throws std::runtime_error when the options ask for plaintext towards a non-loopback
/// address without `insecure`.
std::shared_ptr<grpc::Channel> make_channel(const ClientOptions &options);

/// A context for one call: the token and a deadline (none for 0).
std::unique_ptr<grpc::ClientContext> make_context(const ClientOptions &options, double timeout_seconds);

/// Server side: OK when `context` carries `expected` (always OK when `expected` is
/// empty); UNAUTHENTICATED with a message otherwise. Compared in constant time.
grpc::Status check_token(const grpc::ServerContext &context, const std::string &expected);

/// "host:port: <status message> (<code name>)", for error messages.
std::string describe(const grpc::Status &status);

}  // namespace kiln::rpc
