#include "tracker/tracker_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <initializer_list>
#include <stdexcept>
#include <utility>

#include "rpc/connection.h"
#include "rpc/digest.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"

namespace kiln::tracker {

namespace {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

grpc::Status check_version(v1::ProtocolVersion version) {
  if (version == v1::PROTOCOL_VERSION_1) return grpc::Status::OK;
  return grpc::Status(grpc::FAILED_PRECONDITION,
                      "this tracker speaks protocol version 1, the caller " +
                          (version == v1::PROTOCOL_VERSION_UNSPECIFIED ? std::string("sent none")
                                                                       : "speaks version " + std::to_string(version)) +
                          "; run the same Kiln release on both sides");
}

/// Keys and ids are stored, listed by `kiln tracker status` and matched against
/// tracker:// URIs: one alphabet for all (rpc::why_not_a_name).
grpc::Status check_names(std::initializer_list<std::pair<const char *, const std::string &>> names) {
  for (const auto &[field, value] : names) {
    if (std::string why = rpc::why_not_a_name(value); !why.empty()) {
      return grpc::Status(grpc::INVALID_ARGUMENT, std::string("the ") + field + " " + why);
    }
  }
  return grpc::Status::OK;
}

/// A runner's target is shown to operators and handed to tuners, who parse it.
grpc::Status check_target(const std::string &target) {
  constexpr size_t kMaxTargetBytes = 1024;
  if (target.size() > kMaxTargetBytes) {
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        "the runner's target is longer than " + std::to_string(kMaxTargetBytes) + " bytes");
  }
  for (char c : target) {
    if (c < 0x20 || c > 0x7e) {
      return grpc::Status(grpc::INVALID_ARGUMENT, "the runner's target holds a control character or non-ASCII byte");
    }
  }
  return grpc::Status::OK;
}

}  // namespace

class TrackerServer::Service final : public v1::Tracker::Service {
 public:
  Service(Dispatcher &dispatcher, BlobStore &blobs, rpc::RoleTokens tokens)
      : dispatcher_(dispatcher), blobs_(blobs), tokens_(std::move(tokens)) {}

  grpc::Status FindMissingBlobs(grpc::ServerContext *context, const v1::FindMissingBlobsRequest *request,
                                v1::FindMissingBlobsResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    for (const v1::Digest &digest : request->digests()) {
      if (!blobs_.contains(digest)) *response->add_missing() = digest;
    }
    return grpc::Status::OK;
  }

  grpc::Status UploadBlob(grpc::ServerContext *context, grpc::ServerReader<v1::BlobChunk> *reader,
                          v1::UploadBlobResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    v1::BlobChunk chunk;
    if (!reader->Read(&chunk)) return grpc::Status(grpc::INVALID_ARGUMENT, "the upload carried no chunk");
    v1::Digest digest = chunk.digest();
    // Refused before any more bytes are read: the declared size is over the cap.
    if (auto error = blobs_.check_upload(digest)) return grpc::Status(grpc::RESOURCE_EXHAUSTED, *error);
    std::string bytes;
    bytes.reserve(std::min(static_cast<size_t>(digest.size_bytes()), rpc::kBlobChunkBytes));
    do {
      if (static_cast<int64_t>(bytes.size() + chunk.data().size()) > digest.size_bytes()) {
        return grpc::Status(grpc::INVALID_ARGUMENT, "the upload carries more bytes than its digest declares");
      }
      bytes += chunk.data();
    } while (reader->Read(&chunk));
    bool stored = false;
    if (auto error = blobs_.put(digest, std::move(bytes), &stored)) {
      return grpc::Status(grpc::INVALID_ARGUMENT, *error);
    }
    response->set_stored(stored);
    return grpc::Status::OK;
  }

  grpc::Status FetchBlob(grpc::ServerContext *context, const v1::FetchBlobRequest *request,
                         grpc::ServerWriter<v1::BlobChunk> *writer) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kRunner); !status.ok()) return status;
    std::shared_ptr<const std::string> bytes = blobs_.get(request->digest());
    if (!bytes) {
      return grpc::Status(grpc::NOT_FOUND, "the tracker does not hold blob " + request->digest().sha256());
    }
    v1::BlobChunk chunk;
    *chunk.mutable_digest() = request->digest();
    size_t offset = 0;
    do {
      size_t n = std::min(rpc::kBlobChunkBytes, bytes->size() - offset);
      chunk.set_data(bytes->substr(offset, n));
      if (!writer->Write(chunk)) return grpc::Status(grpc::CANCELLED, "the runner went away");
      chunk.clear_digest();
      offset += n;
    } while (offset < bytes->size());
    return grpc::Status::OK;
  }

  grpc::Status Submit(grpc::ServerContext *context, const v1::SubmitRequest *request,
                      v1::SubmitResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    if (auto status = check_version(request->protocol_version()); !status.ok()) return status;
    if (request->session_id().empty() || request->key().empty()) {
      return grpc::Status(grpc::INVALID_ARGUMENT, "a submission needs a session_id and a key");
    }
    if (auto status = check_names({{"key", request->key()}, {"session_id", request->session_id()}}); !status.ok()) {
      return status;
    }
    if (request->jobs_size() > dispatcher_.options().max_jobs_per_submit) {
      return grpc::Status(grpc::RESOURCE_EXHAUSTED, "a submission may carry at most " +
                                                        std::to_string(dispatcher_.options().max_jobs_per_submit) +
                                                        " jobs; split the batch");
    }
    *response = dispatcher_.submit(*request, [this](const v1::Digest &d) { return blobs_.contains(d); });
    return grpc::Status::OK;
  }

  grpc::Status PollResults(grpc::ServerContext *context, const v1::PollResultsRequest *request,
                           v1::PollResultsResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    *response = dispatcher_.poll_results(request->session_id(), std::min(request->wait_seconds(), 60.0),
                                         [context] { return context->IsCancelled(); });
    return grpc::Status::OK;
  }

  grpc::Status AckResults(grpc::ServerContext *context, const v1::AckResultsRequest *request,
                          v1::AckResultsResponse *) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    dispatcher_.ack_results(request->session_id(), {request->job_ids().begin(), request->job_ids().end()});
    return grpc::Status::OK;
  }

  grpc::Status Cancel(grpc::ServerContext *context, const v1::CancelRequest *request,
                      v1::CancelResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    response->set_cancelled(
        dispatcher_.cancel(request->session_id(), {request->job_ids().begin(), request->job_ids().end()}));
    return grpc::Status::OK;
  }

  grpc::Status GetTarget(grpc::ServerContext *context, const v1::GetTargetRequest *request,
                         v1::GetTargetResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) return status;
    *response = dispatcher_.target_of(request->key());
    return grpc::Status::OK;
  }

  grpc::Status RunnerPoll(grpc::ServerContext *context, const v1::RunnerPollRequest *request,
                          v1::RunnerPollResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kRunner); !status.ok()) return status;
    if (auto status = check_version(request->protocol_version()); !status.ok()) return status;
    if (request->runner_id().empty() || request->key().empty()) {
      return grpc::Status(grpc::INVALID_ARGUMENT, "a runner poll needs a runner_id and a key");
    }
    if (auto status = check_names({{"key", request->key()}, {"runner_id", request->runner_id()}}); !status.ok()) {
      return status;
    }
    if (auto status = check_target(request->facts().target()); !status.ok()) return status;
    v1::RunnerPollRequest bounded = *request;
    bounded.set_wait_seconds(std::min(request->wait_seconds(), 60.0));
    std::string refusal;
    *response = dispatcher_.poll_runner(
        bounded, [context] { return context->IsCancelled(); }, refusal);
    if (!refusal.empty()) return grpc::Status(grpc::FAILED_PRECONDITION, refusal);
    return grpc::Status::OK;
  }

  grpc::Status ReportResult(grpc::ServerContext *context, const v1::ReportResultRequest *request,
                            v1::ReportResultResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kRunner); !status.ok()) return status;
    response->set_accepted(dispatcher_.report_result(request->runner_id(), request->result()));
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext *context, const v1::StatusRequest *, v1::StatusResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, std::nullopt); !status.ok()) return status;
    *response = dispatcher_.status();
    response->set_blobs(blobs_.count());
    response->set_blob_bytes(blobs_.total_bytes());
    return grpc::Status::OK;
  }

 private:
  Dispatcher &dispatcher_;
  BlobStore &blobs_;
  rpc::RoleTokens tokens_;
};

TrackerServer::TrackerServer(TrackerOptions options) : options_(std::move(options)) {
  rpc::parse_host_port(options_.listen_address, "the listen address", /*allow_any_port=*/true);
  bool tls = !options_.tls_cert_pem.empty() || !options_.tls_key_pem.empty();
  if (tls && (options_.tls_cert_pem.empty() || options_.tls_key_pem.empty())) {
    throw std::runtime_error("TLS needs both --tls-cert and --tls-key");
  }
  if (!options_.insecure && !rpc::is_loopback_address(options_.listen_address)) {
    if (!tls) {
      throw std::runtime_error("refusing to listen on " + options_.listen_address +
                               " in plaintext: runners execute the code they receive, so give --tls-cert and "
                               "--tls-key (and a --token-file), or pass --insecure on a network you trust");
    }
    if (options_.tokens.submitter.empty() || options_.tokens.runner.empty()) {
      throw std::runtime_error("refusing to listen on " + options_.listen_address +
                               " without a token for each role: anyone who reaches it could make the runners execute "
                               "code, or report latencies; give --submitter-token-file and --runner-token-file, or "
                               "pass --insecure on a network you trust");
    }
  }
  dispatcher_ = std::make_unique<Dispatcher>(options_.dispatcher, monotonic_seconds, rpc::random_id());
  blobs_ = std::make_unique<BlobStore>(options_.blobs, [this] { return dispatcher_->blobs_in_use(); });
  service_ = std::make_unique<Service>(*dispatcher_, *blobs_, options_.tokens);

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options_.tls_key_pem, options_.tls_cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  // A stale tracker on the same port must make this one fail, not share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Each waiting long poll holds a thread of the sync server; bound them.
  grpc::ResourceQuota quota("kiln-tracker");
  quota.SetMaxThreads(512);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(rpc::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(rpc::kMaxMessageBytes);
  builder.AddListeningPort(options_.listen_address, credentials, &port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw std::runtime_error("cannot listen on " + options_.listen_address +
                             ": the address is malformed or in use (another tracker?)");
  }
  expiry_ = std::thread([this] {
    while (!stopping_) {
      dispatcher_->expire();
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });
}

TrackerServer::~TrackerServer() {
  shut_down();
  if (expiry_.joinable()) expiry_.join();
}

void TrackerServer::wait() { server_->Wait(); }

void TrackerServer::shut_down() {
  if (stopping_.exchange(true)) return;
  dispatcher_->shut_down();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace kiln::tracker
