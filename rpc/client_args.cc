#include "rpc/client_args.h"

namespace kiln::rpc {

void ClientArgs::add_flags(CLI::App &cmd, const std::string &hidden_alias_prefix) {
  cmd.add_option("--token-file", token_file, "file whose first line is the tracker's token")->check(CLI::ExistingFile);
  cmd.add_option("--tls-ca", tls_ca, "PEM CA certificate that signed the tracker's certificate (enables TLS)")
      ->check(CLI::ExistingFile);
  cmd.add_flag("--insecure", insecure, "allow plaintext to a non-loopback tracker (the token travels in the clear)");
  if (hidden_alias_prefix.empty()) return;
  const std::string p = "--" + hidden_alias_prefix;
  cmd.add_option(p + "token-file", token_file)->check(CLI::ExistingFile)->group("");
  cmd.add_option(p + "tls-ca", tls_ca)->check(CLI::ExistingFile)->group("");
  cmd.add_flag(p + "insecure", insecure)->group("");
}

ClientOptions ClientArgs::options(const std::string &address) const {
  ClientOptions options;
  options.address = address;
  options.insecure = insecure;
  if (!token_file.empty()) options.token = read_token_file(token_file);
  if (!tls_ca.empty()) options.tls_ca_pem = read_pem_file(tls_ca, "CA certificate");
  return options;
}

}  // namespace kiln::rpc
