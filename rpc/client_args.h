// The flags every tracker client takes (`kiln tune --runner tracker://…`, `kiln tracker
// status`, `kiln runner`): the token file, the CA certificate and plaintext consent,
// declared once and turned into rpc::ClientOptions once.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "rpc/connection.h"

namespace kiln::rpc {

struct ClientArgs {
  std::string token_file;
  std::string tls_ca;
  bool insecure = false;

  /// Adds --<prefix>token-file, --<prefix>tls-ca and --<prefix>insecure to `cmd`
  /// (`prefix` "tracker-" on commands whose other flags are not the tracker's).
  void add_flags(CLI::App &cmd, const std::string &prefix = "");
  /// The options for a tracker at `address`, with the files read. Throws
  /// std::runtime_error naming a missing, unreadable or empty file.
  ClientOptions options(const std::string &address) const;
};

}  // namespace kiln::rpc
