// Content digests (SHA-256) for blobs, and the constant-time comparison of secrets.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "rpc/proto/kiln_tracker.pb.h"
#include "support/sha256.h"

namespace kiln::rpc {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;
  void update(std::string_view bytes);
  /// Lowercase hex of the digest; the object cannot be updated afterwards.
  std::string hex();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The digest of a blob held in memory.
v1::Digest digest_of(std::string_view bytes);

/// Reads a whole file; throws std::runtime_error naming the file when it cannot.
std::string read_file_bytes(const std::filesystem::path &path);

/// True when `a` equals `b`, in time that depends on neither (both are hashed first,
/// then the digests compared with CRYPTO_memcmp), so a token cannot be guessed byte
/// by byte from response times.
bool secrets_equal(std::string_view a, std::string_view b);

/// 128 random bits (OpenSSL's generator) as 32 hex digits: tracker instances, tuner
/// sessions, runner processes.
std::string random_id();

}  // namespace kiln::rpc
