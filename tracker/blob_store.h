// The tracker's content-addressed blobs (artifacts, reference artifacts). Tuners upload
// each blob once (FindMissingBlobs first); runners fetch them by digest. Small blobs
// are kept in memory; larger ones are written to files as their chunks arrive and read
// back chunk by chunk, so the tracker's memory does not grow with blob sizes.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "rpc/digest.h"
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
  /// Blobs larger than this live in files under `spill_directory`.
  int64_t max_memory_blob_bytes = int64_t{256} << 10;
  /// Empty: a private directory under $TMPDIR (or /tmp), removed with the store.
  std::string spill_directory;
};

/// Thread-safe.
class BlobStore {
 public:
  /// Throws std::runtime_error when the spill directory cannot be made.
  explicit BlobStore(BlobStoreOptions options);
  ~BlobStore();  ///< removes the files it wrote
  BlobStore(const BlobStore &) = delete;
  BlobStore &operator=(const BlobStore &) = delete;

  bool contains(const v1::Digest &digest);
  /// +1 / -1 as unresolved jobs start and stop needing the blob (Dispatcher::BlobPin):
  /// pinned blobs are never dropped.
  void pin(const v1::Digest &digest, int delta);

  /// Why a blob with this digest cannot be stored (size over the cap, malformed
  /// digest), or nullopt when an upload may begin.
  std::optional<std::string> check_upload(const v1::Digest &digest) const;

  /// An upload in progress: its chunks are hashed as they come and kept in memory or
  /// appended to a file, by the declared size.
  class Upload {
   public:
    ~Upload();  ///< removes the file of an upload never finished
    Upload(const Upload &) = delete;
    Upload &operator=(const Upload &) = delete;
    /// An error when the bytes overrun the declared size or cannot be written.
    std::optional<std::string> append(std::string_view bytes);

   private:
    friend class BlobStore;
    Upload() = default;
    v1::Digest digest_;
    int64_t received_ = 0;
    rpc::Sha256 hash_;
    std::string bytes_;  // in memory, or
    std::string path_;   // the file being written
    std::FILE *file_ = nullptr;
  };

  /// Starts an upload (after check_upload); nullptr with `error` set when its file
  /// cannot be created.
  std::unique_ptr<Upload> begin_upload(const v1::Digest &digest, std::string &error);
  /// Stores the upload after checking that its bytes hash to its digest. Returns an
  /// error message when they do not or when the store is full; nullopt on success.
  std::optional<std::string> finish_upload(std::unique_ptr<Upload> upload, bool *stored);
  /// begin_upload, append and finish_upload of a whole blob at once.
  std::optional<std::string> put(const v1::Digest &digest, std::string_view bytes, bool *stored);

  /// Gives the blob's bytes to `sink` in pieces of at most `chunk_bytes` until it
  /// returns false. False when the blob is not held.
  bool read(const v1::Digest &digest, size_t chunk_bytes, const std::function<bool(std::string_view)> &sink);

  int64_t count();
  int64_t total_bytes();
  /// The part of total_bytes() held in memory.
  int64_t memory_bytes();

 private:
  struct Blob {
    std::shared_ptr<const std::string> bytes;  // null: in the file `path`
    std::string path;
    int64_t size = 0;
    uint64_t stored_order = 0;
    std::chrono::steady_clock::time_point stored_at;
  };
  void drop(std::map<std::string, Blob>::iterator blob);

  BlobStoreOptions options_;
  std::string spill_directory_;
  bool owns_spill_directory_ = false;
  std::mutex mutex_;
  std::map<std::string, Blob> blobs_;       // by sha256
  std::map<uint64_t, std::string> by_age_;  // stored_order -> sha256
  std::map<std::string, int64_t> pins_;     // sha256 -> unresolved jobs needing it
  int64_t total_bytes_ = 0;
  int64_t memory_bytes_ = 0;
  uint64_t next_order_ = 0;
  uint64_t next_upload_ = 0;
};

}  // namespace kiln::tracker
