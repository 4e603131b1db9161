// The tracker's blob store: large blobs go through files (memory does not grow with
// their size), pinned blobs are never dropped, and a corrupt upload leaves nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "rpc/digest.h"
#include "tracker/blob_store.h"

namespace kiln::tracker {
namespace {

namespace fs = std::filesystem;

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(n, '\0');
  for (char &c : bytes) c = static_cast<char>(random());
  return bytes;
}

std::string read_all(BlobStore &store, const v1::Digest &digest, size_t chunk, int *chunks = nullptr) {
  std::string out;
  bool held = store.read(digest, chunk, [&](std::string_view piece) {
    EXPECT_LE(piece.size(), chunk);
    out.append(piece);
    if (chunks) ++*chunks;
    return true;
  });
  EXPECT_TRUE(held);
  return out;
}

size_t files_in(const fs::path &directory) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(directory), fs::directory_iterator()));
}

class BlobStoreTest : public ::testing::Test {
 protected:
  BlobStoreTest() : directory_(fs::temp_directory_path() / ("kiln-blob-test-" + std::to_string(getpid()))) {
    fs::remove_all(directory_);
  }
  ~BlobStoreTest() override { fs::remove_all(directory_); }

  BlobStoreOptions options() const {
    BlobStoreOptions o;
    o.max_memory_blob_bytes = 1000;
    o.max_total_bytes = 100000;
    o.keep_uploaded_seconds = 0;
    o.spill_directory = directory_.string();
    return o;
  }

  fs::path directory_;
};

TEST_F(BlobStoreTest, LargeBlobsLiveInFilesAndAreReadBackInChunks) {
  BlobStore store(options());
  std::string small = random_bytes(900, 1), large = random_bytes(50000, 2);
  v1::Digest small_digest = rpc::digest_of(small), large_digest = rpc::digest_of(large);
  bool stored = false;
  ASSERT_EQ(store.put(small_digest, small, &stored), std::nullopt);
  EXPECT_TRUE(stored);
  // Streamed in pieces, as an upload arrives.
  std::string error;
  auto upload = store.begin_upload(large_digest, error);
  ASSERT_TRUE(upload) << error;
  for (size_t at = 0; at < large.size(); at += 7000) {
    ASSERT_EQ(upload->append(std::string_view(large).substr(at, 7000)), std::nullopt);
  }
  ASSERT_EQ(store.finish_upload(std::move(upload), &stored), std::nullopt);
  EXPECT_TRUE(stored);
  EXPECT_EQ(store.memory_bytes(), 900) << "the large blob is held in memory";
  EXPECT_EQ(store.total_bytes(), 50900);
  EXPECT_TRUE(fs::exists(directory_ / large_digest.sha256()));
  EXPECT_EQ(files_in(directory_), 1u) << "an upload's temporary file was left behind";
  int chunks = 0;
  EXPECT_EQ(read_all(store, large_digest, 4096, &chunks), large);
  EXPECT_EQ(chunks, 13);
  EXPECT_EQ(read_all(store, small_digest, 4096), small);
  EXPECT_TRUE(store.contains(large_digest));
  ASSERT_EQ(store.put(large_digest, large, &stored), std::nullopt);
  EXPECT_FALSE(stored) << "the same blob was stored twice";
}

TEST_F(BlobStoreTest, ACorruptUploadIsRefusedAndLeavesNoFile) {
  BlobStore store(options());
  std::string large = random_bytes(20000, 3);
  v1::Digest digest = rpc::digest_of(large);
  large[100] ^= 1;
  bool stored = false;
  auto error = store.put(digest, large, &stored);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("do not hash to"), std::string::npos) << *error;
  EXPECT_FALSE(store.contains(digest));
  EXPECT_EQ(files_in(directory_), 0u);
  std::string start_error;
  auto upload = store.begin_upload(digest, start_error);
  ASSERT_TRUE(upload);
  ASSERT_EQ(upload->append(large), std::nullopt);
  auto overrun = upload->append("x");
  ASSERT_TRUE(overrun);
  EXPECT_NE(overrun->find("more bytes than its digest declares"), std::string::npos);
  upload.reset();  // the caller gave up
  EXPECT_EQ(files_in(directory_), 0u);
}

TEST_F(BlobStoreTest, PinnedBlobsAreNeverDroppedAndTheOldestUnpinnedGoFirst) {
  BlobStoreOptions o = options();
  o.max_total_bytes = 60000;
  BlobStore store(o);
  std::vector<std::string> blobs;
  std::vector<v1::Digest> digests;
  for (unsigned i = 0; i < 4; ++i) {
    blobs.push_back(random_bytes(20000, 10 + i));
    digests.push_back(rpc::digest_of(blobs.back()));
  }
  bool stored = false;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(store.put(digests[i], blobs[i], &stored), std::nullopt);
  store.pin(digests[0], +1);
  ASSERT_EQ(store.put(digests[3], blobs[3], &stored), std::nullopt);
  EXPECT_TRUE(store.contains(digests[0])) << "a pinned blob was dropped";
  EXPECT_FALSE(store.contains(digests[1])) << "not the oldest unpinned blob was dropped";
  EXPECT_TRUE(store.contains(digests[2]));
  EXPECT_FALSE(fs::exists(directory_ / digests[1].sha256()));
  store.pin(digests[2], +1);
  store.pin(digests[3], +1);
  auto full = store.put(digests[1], blobs[1], &stored);
  ASSERT_TRUE(full);
  EXPECT_NE(full->find("--max-store-mb"), std::string::npos) << *full;
  store.pin(digests[0], -1);
  EXPECT_EQ(store.put(digests[1], blobs[1], &stored), std::nullopt);
  EXPECT_FALSE(store.contains(digests[0]));
}

TEST_F(BlobStoreTest, TheDefaultDirectoryIsPrivateAndRemoved) {
  BlobStoreOptions o = options();
  o.spill_directory.clear();
  std::string large = random_bytes(5000, 4);
  v1::Digest digest = rpc::digest_of(large);
  fs::path where;
  {
    BlobStore store(o);
    bool stored = false;
    ASSERT_EQ(store.put(digest, large, &stored), std::nullopt);
    for (const auto &entry : fs::directory_iterator(fs::temp_directory_path())) {
      if (entry.path().filename().string().rfind("kiln-tracker-blobs-", 0) == 0 &&
          fs::exists(entry.path() / digest.sha256()))
        where = entry.path();
    }
    ASSERT_FALSE(where.empty());
    EXPECT_EQ(fs::status(where).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  }
  EXPECT_FALSE(fs::exists(where));
}

}  // namespace
}  // namespace kiln::tracker
