#include "rpc/blob_transfer.h"

#include <fstream>

#include "rpc/digest.h"

namespace kiln::rpc {

grpc::Status upload_blob(v1::Tracker::Stub &stub, const ClientOptions &options, const v1::Digest &digest,
                         const std::string &bytes, double timeout_seconds) {
  auto context = make_context(options, timeout_seconds);
  v1::UploadBlobResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::BlobChunk>> writer = stub.UploadBlob(context.get(), &response);
  v1::BlobChunk chunk;
  *chunk.mutable_digest() = digest;
  size_t offset = 0;
  do {
    size_t n = std::min(kBlobChunkBytes, bytes.size() - offset);
    chunk.set_data(bytes.substr(offset, n));
    // A refused upload ends the stream early; Finish() then says why.
    if (!writer->Write(chunk)) break;
    chunk.clear_digest();
    offset += n;
  } while (offset < bytes.size());
  writer->WritesDone();
  return writer->Finish();
}

grpc::Status fetch_blob(v1::Tracker::Stub &stub, const ClientOptions &options, const v1::Digest &digest,
                        int64_t max_bytes, double timeout_seconds, const std::filesystem::path &path) {
  if (digest.size_bytes() > max_bytes) {
    return grpc::Status(grpc::RESOURCE_EXHAUSTED, "the blob is " + std::to_string(digest.size_bytes()) +
                                                      " bytes, over this runner's cap of " + std::to_string(max_bytes) +
                                                      " bytes (kiln runner --max-blob-mb)");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return grpc::Status(grpc::INTERNAL, "cannot create " + path.string());
  auto fail = [&](grpc::Status status) {
    out.close();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return status;
  };
  auto context = make_context(options, timeout_seconds);
  v1::FetchBlobRequest request;
  *request.mutable_digest() = digest;
  std::unique_ptr<grpc::ClientReader<v1::BlobChunk>> reader = stub.FetchBlob(context.get(), request);
  Sha256 hash;
  int64_t received = 0;
  v1::BlobChunk chunk;
  bool too_long = false;
  while (reader->Read(&chunk)) {
    if (received + static_cast<int64_t>(chunk.data().size()) > digest.size_bytes()) {
      too_long = true;
      context->TryCancel();
      break;
    }
    received += static_cast<int64_t>(chunk.data().size());
    hash.update(chunk.data());
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
  }
  grpc::Status status = reader->Finish();
  if (too_long)
    return fail(grpc::Status(grpc::DATA_LOSS, "the tracker sent more bytes than the blob's digest declares"));
  if (!status.ok()) return fail(status);
  if (received != digest.size_bytes() || hash.hex() != digest.sha256()) {
    return fail(grpc::Status(grpc::DATA_LOSS, "the fetched bytes do not match the digest " + digest.sha256()));
  }
  out.close();  // a full disk shows only at the flush
  if (!out) return fail(grpc::Status(grpc::INTERNAL, "cannot write " + path.string() + " (disk full?)"));
  return grpc::Status::OK;
}

}  // namespace kiln::rpc
