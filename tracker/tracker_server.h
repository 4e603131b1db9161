// `kiln tracker`: the gRPC front of the dispatcher and the blob store. The handlers
// only authenticate, translate and call; all decisions are the dispatcher's.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "rpc/connection.h"
#include "tracker/blob_store.h"
#include "tracker/dispatcher.h"

namespace grpc {
class Server;
}

namespace kiln::tracker {

struct TrackerOptions {
  /// host:port; port 0 picks a free port (see TrackerServer::port).
  std::string listen_address = "127.0.0.1:9190";
  /// The tokens tuners (submitter) and runners must present; both empty: none needed.
  /// One empty alone is refused at construction (that role would be open to anyone).
  /// The same one for both: one token for everything (`--token-file`).
  rpc::RoleTokens tokens;
  /// PEM certificate and key; both empty: plaintext, allowed only on loopback
  /// addresses unless `insecure`.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  bool insecure = false;
  DispatcherOptions dispatcher;
  BlobStoreOptions blobs;
};

class TrackerServer {
 public:
  /// Binds and starts serving; throws std::runtime_error with a message when the
  /// address cannot be bound or the options are refused.
  explicit TrackerServer(TrackerOptions options);
  ~TrackerServer();
  TrackerServer(const TrackerServer &) = delete;
  TrackerServer &operator=(const TrackerServer &) = delete;

  int port() const { return port_; }
  Dispatcher &dispatcher() { return *dispatcher_; }

  /// Blocks until shut_down() is called (from a signal-watching thread, say).
  void wait();
  void shut_down();

 private:
  class Service;
  TrackerOptions options_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<BlobStore> blobs_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread expiry_;
};

}  // namespace kiln::tracker
