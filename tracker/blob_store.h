// The tracker's content-addressed blobs (artifacts, reference artifacts), in memory.
// Tuners upload each blob once (FindMissingBlobs first); runners fetch them by digest.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "rpc/proto/kiln_tracker.pb.h"

namespace kiln::tracker {

namespace v1 = kiln::rpc::v1;

struct BlobStoreOptions {
  /// A larger blob is refused when its upload starts, before its bytes are read.
  int64_t max_blob_bytes = int64_t{64} << 20;
  /// Past this, blobs no unresolved job needs are dropped, oldest first; an upload
  /// that still does not fit is refused.
  int64_t max_total_bytes = int64_t{2} << 30;
  /// A blob is never dropped this soon after its upload, so that it survives until
  /// the submission that follows the upload names it.
  double keep_uploaded_seconds = 300;
};

/// Thread-safe.
class BlobStore {
 public:
  /// `in_use` names the digests unresolved jobs still need (never evicted).
  BlobStore(BlobStoreOptions options, std::function<std::set<std::string>()> in_use);

  bool contains(const v1::Digest &digest);
  /// Shared, immutable bytes; nullptr when the blob is not held.
  std::shared_ptr<const std::string> get(const v1::Digest &digest);

  /// Why a blob with this digest cannot be stored (size over the cap, malformed
  /// digest), or nullopt when an upload may begin.
  std::optional<std::string> check_upload(const v1::Digest &digest) const;
  /// Stores `bytes` under `digest` after checking that they hash to it. Returns an
  /// error message when they do not or when the store is full; nullopt on success.
  std::optional<std::string> put(const v1::Digest &digest, std::string bytes, bool *stored);

  int64_t count();
  int64_t total_bytes();

 private:
  struct Blob {
    std::shared_ptr<const std::string> bytes;
    uint64_t stored_order = 0;
    std::chrono::steady_clock::time_point stored_at;
  };

  BlobStoreOptions options_;
  std::function<std::set<std::string>()> in_use_;
  std::mutex mutex_;
  std::map<std::string, Blob> blobs_;  // by sha256
  int64_t total_bytes_ = 0;
  uint64_t next_order_ = 0;
};

}  // namespace kiln::tracker
