// SHA-256 of a byte string as lowercase hex: the hash behind workload keys.

#pragma once

#include <string>
#include <string_view>

namespace kiln::support {

/// Returns the SHA-256 digest of `data` as 64 lowercase hex characters.
/// Other compilers recompute workload key hashes with any SHA-256, so the
/// output format (lowercase, no prefix) is part of the database contract.
std::string sha256_hex(std::string_view data);

}  // namespace kiln::support
