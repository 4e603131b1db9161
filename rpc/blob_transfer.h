// Moving blobs to and from the tracker in chunks (rpc/proto/kiln_tracker.proto).
#pragma once

#include <filesystem>
#include <string>

#include "rpc/connection.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"

namespace kiln::rpc {

/// Uploads `bytes` under `digest` (digest_of(bytes)).
grpc::Status upload_blob(v1::Tracker::Stub &stub, const ClientOptions &options, const v1::Digest &digest,
                         const std::string &bytes, double timeout_seconds);

/// Fetches the blob into the file `path` chunk by chunk (never whole in memory),
/// refusing one larger than `max_bytes` before reading it and one whose bytes do not
/// match the digest; on any failure the file is removed. A write error is INTERNAL.
grpc::Status fetch_blob(v1::Tracker::Stub &stub, const ClientOptions &options, const v1::Digest &digest,
                        int64_t max_bytes, double timeout_seconds, const std::filesystem::path &path);

}  // namespace kiln::rpc
