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

  /// Adds --token-file, --tls-ca and --insecure to `cmd`, the same on every command,
  /// and, with `hidden_alias_prefix`, --<prefix>token-file … as hidden aliases (the
  /// spellings `kiln tune` used to take).
  void add_flags(CLI::App &cmd, const std::string &hidden_alias_prefix = "");
  /// The options for a tracker at `address`, with the files read. Throws
  /// std::runtime_error naming a missing, unreadable or empty file.
  ClientOptions options(const std::string &address) const;
};

}  // namespace kiln::rpc
