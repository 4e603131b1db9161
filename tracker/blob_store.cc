#include "tracker/blob_store.h"

#include <algorithm>

#include "rpc/digest.h"

namespace kiln::tracker {

BlobStore::BlobStore(BlobStoreOptions options, std::function<std::set<std::string>()> in_use)
    : options_(options), in_use_(std::move(in_use)) {}

bool BlobStore::contains(const v1::Digest &digest) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blobs_.find(digest.sha256());
  return it != blobs_.end() && static_cast<int64_t>(it->second.bytes->size()) == digest.size_bytes();
}

std::shared_ptr<const std::string> BlobStore::get(const v1::Digest &digest) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blobs_.find(digest.sha256());
  if (it == blobs_.end()) return nullptr;
  return it->second.bytes;
}

std::optional<std::string> BlobStore::check_upload(const v1::Digest &digest) const {
  const std::string &hex = digest.sha256();
  bool well_formed = hex.size() == 64 && std::all_of(hex.begin(), hex.end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
  if (!well_formed) return "the digest '" + hex + "' is not 64 lowercase hex digits of a SHA-256";
  if (digest.size_bytes() < 0) return "the blob's declared size is negative";
  if (digest.size_bytes() > options_.max_blob_bytes) {
    return "the blob is " + std::to_string(digest.size_bytes()) + " bytes, over the tracker's cap of " +
           std::to_string(options_.max_blob_bytes) + " bytes (kiln tracker --max-blob-mb)";
  }
  return std::nullopt;
}

std::optional<std::string> BlobStore::put(const v1::Digest &digest, std::string bytes, bool *stored) {
  if (auto error = check_upload(digest)) return error;
  if (static_cast<int64_t>(bytes.size()) != digest.size_bytes()) {
    return "the upload carried " + std::to_string(bytes.size()) + " bytes, not the " +
           std::to_string(digest.size_bytes()) + " its digest declares";
  }
  if (support::sha256_hex(bytes) != digest.sha256()) return "the uploaded bytes do not hash to " + digest.sha256();
  std::set<std::string> in_use = in_use_();  // before taking our lock: the dispatcher has its own
  std::lock_guard<std::mutex> lock(mutex_);
  if (blobs_.count(digest.sha256())) {
    *stored = false;
    return std::nullopt;
  }
  int64_t size = static_cast<int64_t>(bytes.size());
  if (total_bytes_ + size > options_.max_total_bytes) {
    std::vector<std::pair<uint64_t, std::string>> evictable;
    auto young = std::chrono::steady_clock::now() - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(options_.keep_uploaded_seconds));
    for (const auto &[sha, blob] : blobs_) {
      if (!in_use.count(sha) && blob.stored_at < young) evictable.emplace_back(blob.stored_order, sha);
    }
    std::sort(evictable.begin(), evictable.end());
    for (const auto &[order, sha] : evictable) {
      if (total_bytes_ + size <= options_.max_total_bytes) break;
      total_bytes_ -= static_cast<int64_t>(blobs_.at(sha).bytes->size());
      blobs_.erase(sha);
    }
    if (total_bytes_ + size > options_.max_total_bytes) {
      return "the tracker's blob store is full (" + std::to_string(total_bytes_) +
             " bytes held for queued jobs or just uploaded; kiln tracker --max-store-mb)";
    }
  }
  blobs_[digest.sha256()] =
      Blob{std::make_shared<const std::string>(std::move(bytes)), next_order_++, std::chrono::steady_clock::now()};
  total_bytes_ += size;
  *stored = true;
  return std::nullopt;
}

int64_t BlobStore::count() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(blobs_.size());
}

int64_t BlobStore::total_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

}  // namespace kiln::tracker
