#include "tracker/blob_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace kiln::tracker {

namespace fs = std::filesystem;

BlobStore::BlobStore(BlobStoreOptions options) : options_(std::move(options)) {
  if (options_.spill_directory.empty()) {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-tracker-blobs-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!mkdtemp(buffer.data())) {
      throw std::runtime_error("cannot create a directory for the tracker's large blobs under " +
                               pattern.substr(0, pattern.rfind('/')) + ": " + std::generic_category().message(errno) +
                               "; set TMPDIR or give --blob-dir");
    }
    spill_directory_ = buffer.data();
    owns_spill_directory_ = true;
  } else {
    std::error_code error;
    fs::create_directories(options_.spill_directory, error);
    if (error || !fs::is_directory(options_.spill_directory)) {
      throw std::runtime_error("cannot use " + options_.spill_directory +
                               " for the tracker's large blobs: " + error.message());
    }
    spill_directory_ = options_.spill_directory;
  }
}

BlobStore::~BlobStore() {
  std::error_code ignored;
  for (const auto &[sha, blob] : blobs_) {
    if (!blob.bytes) fs::remove(blob.path, ignored);
  }
  if (owns_spill_directory_) fs::remove_all(spill_directory_, ignored);
}

bool BlobStore::contains(const v1::Digest &digest) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blobs_.find(digest.sha256());
  return it != blobs_.end() && it->second.size == digest.size_bytes();
}

void BlobStore::pin(const v1::Digest &digest, int delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pins_.try_emplace(digest.sha256(), 0).first;
  it->second += delta;
  if (it->second <= 0) pins_.erase(it);
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

BlobStore::Upload::~Upload() {
  if (file_) std::fclose(file_);
  if (!path_.empty()) std::remove(path_.c_str());
}

std::optional<std::string> BlobStore::Upload::append(std::string_view bytes) {
  if (received_ + static_cast<int64_t>(bytes.size()) > digest_.size_bytes()) {
    return "the upload carries more bytes than its digest declares";
  }
  received_ += static_cast<int64_t>(bytes.size());
  hash_.update(bytes);
  if (!file_) {
    bytes_.append(bytes);
  } else if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return "the tracker could not write the blob to " + path_ + " (disk full?)";
  }
  return std::nullopt;
}

std::unique_ptr<BlobStore::Upload> BlobStore::begin_upload(const v1::Digest &digest, std::string &error) {
  std::unique_ptr<Upload> upload(new Upload);
  upload->digest_ = digest;
  if (digest.size_bytes() <= options_.max_memory_blob_bytes) {
    upload->bytes_.reserve(static_cast<size_t>(digest.size_bytes()));
    return upload;
  }
  uint64_t number;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    number = next_upload_++;
  }
  upload->path_ = spill_directory_ + "/" + digest.sha256() + ".upload-" + std::to_string(number);
  upload->file_ = std::fopen(upload->path_.c_str(), "wb");
  if (!upload->file_) {
    error = "the tracker cannot create " + upload->path_ + ": " + std::generic_category().message(errno);
    upload->path_.clear();
    return nullptr;
  }
  return upload;
}

void BlobStore::drop(std::map<std::string, Blob>::iterator blob) {
  total_bytes_ -= blob->second.size;
  if (blob->second.bytes) {
    memory_bytes_ -= blob->second.size;
  } else {
    // A runner reading it keeps its open file; the name goes now.
    std::remove(blob->second.path.c_str());
  }
  by_age_.erase(blob->second.stored_order);
  blobs_.erase(blob);
}

std::optional<std::string> BlobStore::finish_upload(std::unique_ptr<Upload> upload, bool *stored) {
  const v1::Digest &digest = upload->digest_;
  if (upload->received_ != digest.size_bytes()) {
    return "the upload carried " + std::to_string(upload->received_) + " bytes, not the " +
           std::to_string(digest.size_bytes()) + " its digest declares";
  }
  if (upload->hash_.hex() != digest.sha256()) return "the uploaded bytes do not hash to " + digest.sha256();
  if (upload->file_) {
    bool flushed = std::fflush(upload->file_) == 0;
    std::fclose(upload->file_);
    upload->file_ = nullptr;
    if (!flushed) return "the tracker could not write the blob to " + upload->path_ + " (disk full?)";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (blobs_.count(digest.sha256())) {
    *stored = false;
    return std::nullopt;
  }
  int64_t size = digest.size_bytes();
  if (total_bytes_ + size > options_.max_total_bytes) {
    auto young = std::chrono::steady_clock::now() - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(options_.keep_uploaded_seconds));
    for (auto it = by_age_.begin(); it != by_age_.end() && total_bytes_ + size > options_.max_total_bytes;) {
      auto blob = blobs_.find((it++)->second);
      if (!pins_.count(blob->first) && blob->second.stored_at < young) drop(blob);
    }
    if (total_bytes_ + size > options_.max_total_bytes) {
      return "the tracker's blob store is full (" + std::to_string(total_bytes_) +
             " bytes held for queued jobs or just uploaded; kiln tracker --max-store-mb)";
    }
  }
  Blob blob;
  blob.size = size;
  blob.stored_order = next_order_++;
  blob.stored_at = std::chrono::steady_clock::now();
  if (upload->path_.empty()) {
    blob.bytes = std::make_shared<const std::string>(std::move(upload->bytes_));
    memory_bytes_ += size;
  } else {
    blob.path = spill_directory_ + "/" + digest.sha256();
    if (std::rename(upload->path_.c_str(), blob.path.c_str()) != 0) {
      return "the tracker could not move the blob to " + blob.path + ": " + std::generic_category().message(errno);
    }
    upload->path_.clear();
  }
  by_age_.emplace(blob.stored_order, digest.sha256());
  blobs_.emplace(digest.sha256(), std::move(blob));
  total_bytes_ += size;
  *stored = true;
  return std::nullopt;
}

std::optional<std::string> BlobStore::put(const v1::Digest &digest, std::string_view bytes, bool *stored) {
  if (auto error = check_upload(digest)) return error;
  std::string error;
  std::unique_ptr<Upload> upload = begin_upload(digest, error);
  if (!upload) return error;
  if (auto error = upload->append(bytes)) return error;
  return finish_upload(std::move(upload), stored);
}

bool BlobStore::read(const v1::Digest &digest, size_t chunk_bytes, const std::function<bool(std::string_view)> &sink) {
  std::shared_ptr<const std::string> bytes;
  std::FILE *file = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blobs_.find(digest.sha256());
    if (it == blobs_.end()) return false;
    bytes = it->second.bytes;
    // Opened under the lock: a blob dropped later stays readable through this handle.
    if (!bytes && !(file = std::fopen(it->second.path.c_str(), "rb"))) return false;
  }
  if (bytes) {
    size_t offset = 0;
    do {
      size_t n = std::min(chunk_bytes, bytes->size() - offset);
      if (!sink(std::string_view(*bytes).substr(offset, n))) break;
      offset += n;
    } while (offset < bytes->size());
    return true;
  }
  std::string buffer(chunk_bytes, '\0');
  bool any = false;
  for (;;) {
    size_t n = std::fread(buffer.data(), 1, chunk_bytes, file);
    if (n == 0 && any) break;
    any = true;
    if (!sink(std::string_view(buffer.data(), n)) || n < chunk_bytes) break;
  }
  std::fclose(file);
  return true;
}

int64_t BlobStore::count() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(blobs_.size());
}

int64_t BlobStore::total_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

int64_t BlobStore::memory_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_bytes_;
}

}  // namespace kiln::tracker
