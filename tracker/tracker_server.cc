#include "tracker/tracker_server.h"

#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "rpc/connection.h"
#include "rpc/digest.h"
#include "rpc/proto/kiln_tracker.grpc.pb.h"

namespace kiln::tracker {

namespace {

// Why `address` cannot be listened on (in use, not this host's, a name that does not
// resolve), found by binding it ourselves first; "" when it can be, or when this cannot
// tell. gRPC would say the same as a page of its internal error tree on stderr.
std::string why_cannot_listen(const std::string &address) {
  rpc::HostPort host_port;
  try {
    host_port = rpc::parse_host_port(address, "the listen address", /*allow_any_port=*/true);
  } catch (const std::invalid_argument &) {
    return "";  // gRPC's own refusal follows
  }
  if (host_port.port == 0) return "";
  std::string host = host_port.host;
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo *found = nullptr;
  if (int error = getaddrinfo(host.c_str(), std::to_string(host_port.port).c_str(), &hints, &found); error != 0)
    return "'" + host + "' does not resolve (" + gai_strerror(error) + ")";
  std::string why;
  for (addrinfo *a = found; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
      close(fd);
      why.clear();
      break;
    }
    int error = errno;
    close(fd);
    if (why.empty()) {
      why = std::strerror(error);
      if (error == EADDRINUSE) why += " (another tracker, or another program, holds the port)";
      if (error == EADDRNOTAVAIL) why += " (no network interface of this host has that address)";
      if (error == EACCES) why += " (ports below 1024 need privileges)";
    }
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

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

/// The two long polls are served by the callback API: a waiting poll is a callback held
/// by the dispatcher, not a thread. Blob transfers and short calls stay synchronous.
using ServiceBase =
    v1::Tracker::WithCallbackMethod_RunnerPoll<v1::Tracker::WithCallbackMethod_PollResults<v1::Tracker::Service>>;

/// A long poll's gRPC side: finished by the dispatcher's done-callback; a client that
/// goes away ends the dispatcher's wait.
class LongPoll : public grpc::ServerUnaryReactor {
 public:
  explicit LongPoll(Dispatcher &dispatcher) : dispatcher_(dispatcher), state_(std::make_shared<State>()) {}

  /// Tells the reactor which wait is its; called once, after the poll started.
  void waiting_as(Dispatcher::WaitId id) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->id = id;
    if (state_->cancelled && id != 0) dispatcher_.end_wait(id, /*caller_gone=*/true);
  }

  void OnCancel() override {
    Dispatcher::WaitId id;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->cancelled = true;
      id = state_->id;
    }
    if (id != 0) dispatcher_.end_wait(id, /*caller_gone=*/true);
  }
  void OnDone() override { delete this; }

 private:
  // Shared with nobody but kept apart from the reactor's own storage: OnCancel may run
  // on another thread while waiting_as is called.
  struct State {
    std::mutex mutex;
    Dispatcher::WaitId id = 0;
    bool cancelled = false;
  };
  Dispatcher &dispatcher_;
  std::shared_ptr<State> state_;
};

grpc::ServerUnaryReactor *finished(grpc::CallbackServerContext *context, const grpc::Status &status) {
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

class TrackerServer::Service final : public ServiceBase {
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
    std::string error;
    std::unique_ptr<BlobStore::Upload> upload = blobs_.begin_upload(digest, error);
    if (!upload) return grpc::Status(grpc::INTERNAL, error);
    do {
      if (auto error = upload->append(chunk.data())) return grpc::Status(grpc::INVALID_ARGUMENT, *error);
    } while (reader->Read(&chunk));
    bool stored = false;
    if (auto error = blobs_.finish_upload(std::move(upload), &stored)) {
      return grpc::Status(grpc::INVALID_ARGUMENT, *error);
    }
    response->set_stored(stored);
    return grpc::Status::OK;
  }

  grpc::Status FetchBlob(grpc::ServerContext *context, const v1::FetchBlobRequest *request,
                         grpc::ServerWriter<v1::BlobChunk> *writer) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kRunner); !status.ok()) return status;
    v1::BlobChunk chunk;
    *chunk.mutable_digest() = request->digest();
    bool went_away = false;
    bool held = blobs_.read(request->digest(), rpc::kBlobChunkBytes, [&](std::string_view bytes) {
      chunk.set_data(std::string(bytes));
      if (!writer->Write(chunk)) {
        went_away = true;
        return false;
      }
      chunk.clear_digest();
      return true;
    });
    if (!held) return grpc::Status(grpc::NOT_FOUND, "the tracker does not hold blob " + request->digest().sha256());
    if (went_away) return grpc::Status(grpc::CANCELLED, "the runner went away");
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

  grpc::ServerUnaryReactor *PollResults(grpc::CallbackServerContext *context, const v1::PollResultsRequest *request,
                                        v1::PollResultsResponse *response) override {
    if (auto status = rpc::check_role(*context, tokens_, rpc::Role::kSubmitter); !status.ok()) {
      return finished(context, status);
    }
    auto *reactor = new LongPoll(dispatcher_);
    reactor->waiting_as(dispatcher_.start_poll_results(request->session_id(), std::min(request->wait_seconds(), 60.0),
                                                       [reactor, response](v1::PollResultsResponse result) {
                                                         *response = std::move(result);
                                                         reactor->Finish(grpc::Status::OK);
                                                       }));
    return reactor;
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

  grpc::ServerUnaryReactor *RunnerPoll(grpc::CallbackServerContext *context, const v1::RunnerPollRequest *request,
                                       v1::RunnerPollResponse *response) override {
    if (auto status = check_runner_poll(*context, *request); !status.ok()) return finished(context, status);
    v1::RunnerPollRequest bounded = *request;
    bounded.set_wait_seconds(std::min(request->wait_seconds(), 60.0));
    auto *reactor = new LongPoll(dispatcher_);
    reactor->waiting_as(
        dispatcher_.start_runner_poll(bounded, [reactor, response](v1::RunnerPollResponse result, std::string refusal) {
          if (!refusal.empty()) {
            reactor->Finish(grpc::Status(grpc::FAILED_PRECONDITION, refusal));
            return;
          }
          *response = std::move(result);
          reactor->Finish(grpc::Status::OK);
        }));
    return reactor;
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
  grpc::Status check_runner_poll(const grpc::ServerContextBase &context, const v1::RunnerPollRequest &request) {
    if (auto status = rpc::check_role(context, tokens_, rpc::Role::kRunner); !status.ok()) return status;
    if (auto status = check_version(request.protocol_version()); !status.ok()) return status;
    if (request.runner_id().empty() || request.key().empty()) {
      return grpc::Status(grpc::INVALID_ARGUMENT, "a runner poll needs a runner_id and a key");
    }
    if (auto status = check_names({{"key", request.key()}, {"runner_id", request.runner_id()}}); !status.ok()) {
      return status;
    }
    return check_target(request.facts().target());
  }

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
  // One role guarded and the other open is never what was meant: an open runner role
  // lets anyone report latencies for the submitters' code, an open submitter role lets
  // anyone send code to the guarded runners. Refused on loopback and with --insecure too.
  if (options_.tokens.submitter.empty() != options_.tokens.runner.empty()) {
    const bool runner_open = options_.tokens.runner.empty();
    throw std::runtime_error(std::string("a ") + (runner_open ? "submitter" : "runner") + " token was given but no " +
                             (runner_open ? "runner" : "submitter") +
                             " token: that role would be open to anyone; give both --submitter-token-file and "
                             "--runner-token-file, or one --token-file for both");
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
  blobs_ = std::make_unique<BlobStore>(options_.blobs);
  dispatcher_ =
      std::make_unique<Dispatcher>(options_.dispatcher, monotonic_seconds, rpc::random_id(),
                                   [this](const v1::Digest &digest, int delta) { blobs_->pin(digest, delta); });
  service_ = std::make_unique<Service>(*dispatcher_, *blobs_, options_.tokens);

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({options_.tls_key_pem, options_.tls_cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  if (std::string why = why_cannot_listen(options_.listen_address); !why.empty())
    throw std::runtime_error("cannot listen on " + options_.listen_address + ": " + why);
  grpc::ServerBuilder builder;
  // A stale tracker on the same port must make this one fail, not share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Long polls hold no thread (callback API); blob transfers and short calls do.
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
      // Also the resolution of long polls' waits: each ends within this of its time.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
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
