#include "rpc/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kiln::rpc {

struct Sha256::State {
  EVP_MD_CTX *context = nullptr;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->context = EVP_MD_CTX_new();
  if (!state_->context || EVP_DigestInit_ex(state_->context, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(state_->context); }

void Sha256::update(std::string_view bytes) {
  if (EVP_DigestUpdate(state_->context, bytes.data(), bytes.size()) != 1) {
    throw std::runtime_error("OpenSSL could not update a SHA-256 digest");
  }
}

namespace {

std::string to_hex(const unsigned char *bytes, size_t length) {
  static const char *kHex = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < length; ++i) {
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 15];
  }
  return text;
}

}  // namespace

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(state_->context, digest, &length) != 1) {
    throw std::runtime_error("OpenSSL could not finish a SHA-256 digest");
  }
  return to_hex(digest, length);
}

std::string random_id() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("OpenSSL could not produce random bytes");
  return to_hex(bytes, sizeof bytes);
}

v1::Digest digest_of(std::string_view bytes) {
  v1::Digest digest;
  digest.set_sha256(support::sha256_hex(bytes));
  digest.set_size_bytes(static_cast<int64_t>(bytes.size()));
  return digest;
}

std::string read_file_bytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return std::move(bytes).str();
}

bool secrets_equal(std::string_view a, std::string_view b) {
  std::string da = support::sha256_hex(a), db = support::sha256_hex(b);
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

}  // namespace kiln::rpc
