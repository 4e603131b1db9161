#include "rpc/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <cstdio>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "rpc/digest.h"

namespace kiln::rpc {

namespace {

std::string trim(std::string text) {
  const char *blanks = " \t\r\n";
  size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(blanks);
  return text.substr(begin, end - begin + 1);
}

const char *code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK:
      return "OK";
    case grpc::CANCELLED:
      return "CANCELLED";
    case grpc::UNKNOWN:
      return "UNKNOWN";
    case grpc::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::ABORTED:
      return "ABORTED";
    case grpc::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::INTERNAL:
      return "INTERNAL";
    case grpc::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "unknown code";
  }
}

}  // namespace

std::string read_token_file(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the token file " + path.string());
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && (info.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    throw std::runtime_error("the token file " + path.string() + " may be read by other users (mode " + mode +
                             "): whoever holds the token may run code on the boards or report their latencies; "
                             "make it private with `chmod 600 " +
                             path.string() + "`");
  }
  std::string line;
  char c = 0;
  while (line.size() <= kMaxTokenBytes && in.get(c) && c != '\n') line += c;
  if (line.size() > kMaxTokenBytes) {
    throw std::runtime_error("the first line of the token file " + path.string() + " is longer than " +
                             std::to_string(kMaxTokenBytes) +
                             " bytes; put the token alone on its first line (e.g. the output of "
                             "`openssl rand -hex 32`)");
  }
  line = trim(line);
  if (line.empty())
    throw std::runtime_error("the token file " + path.string() + " is empty; put the token on its first line");
  for (char byte : line) {
    if (byte < 0x21 || byte > 0x7e) {
      throw std::runtime_error("the token in " + path.string() +
                               " holds a blank, a control character or a non-ASCII byte; a token must be visible "
                               "ASCII (e.g. the output of `openssl rand -hex 32`)");
    }
  }
  return line;
}

HostPort parse_host_port(const std::string &text, const std::string &what, bool allow_any_port) {
  auto refuse = [&](const std::string &why) {
    return std::invalid_argument(what + " '" + text + "' " + why +
                                 "; give HOST:PORT, e.g. 127.0.0.1:9190, [::1]:9190 or tracker.lan:9190");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw refuse("has no port");
  HostPort result;
  result.host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (result.host.empty()) throw refuse("has no host");
  if (result.host.front() == '[') {
    in6_addr v6{};
    if (result.host.back() != ']' ||
        inet_pton(AF_INET6, result.host.substr(1, result.host.size() - 2).c_str(), &v6) != 1) {
      throw refuse("has a malformed IPv6 address (write it in brackets: [::1]:9190)");
    }
  } else {
    if (result.host.size() > 253) throw refuse("has a host name longer than 253 characters");
    for (char c : result.host) {
      if (!is_name_char(c)) {
        throw refuse(c == ':' ? "holds an IPv6 address without brackets"
                              : "has a character no host name or address has");
      }
    }
  }
  if (port.empty()) throw refuse("has no port number after the last ':'");
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    throw refuse("has '" + port + "' where the port goes: a port is a whole number from " +
                 std::string(allow_any_port ? "0" : "1") + " to 65535");
  }
  result.port = std::stoi(port);
  int lowest = allow_any_port ? 0 : 1;
  if (result.port < lowest || result.port > 65535) {
    throw refuse("has port " + port + ", outside " + std::to_string(lowest) + " to 65535");
  }
  return result;
}

std::string why_not_a_name(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameBytes) return "is longer than " + std::to_string(kMaxNameBytes) + " characters";
  for (char c : name) {
    if (!is_name_char(c)) return "may hold only letters, digits, '.', '_' and '-'";
  }
  return "";
}

std::string read_pem_file(const std::filesystem::path &path, const char *what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read the ") + what + " file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    throw std::runtime_error(std::string("the ") + what + " file " + path.string() + " is not PEM");
  }
  return text.str();
}

bool is_loopback_address(const std::string &address) {
  std::string host = address;
  if (host.rfind("ipv4:", 0) == 0) host = host.substr(5);
  if (host.rfind("ipv6:", 0) == 0) host = host.substr(5);
  if (!host.empty() && host[0] == '[') {
    host = host.substr(1, host.find(']') - 1);
  } else if (host.find(':') != std::string::npos && host.find(':') == host.rfind(':')) {
    host = host.substr(0, host.find(':'));
  }
  if (host == "localhost") return true;
  // Addresses only: a name like 127.example.com is not loopback.
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

std::shared_ptr<grpc::Channel> make_channel(const ClientOptions &options) {
  parse_host_port(options.address, "the tracker address");
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (!options.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
  } else {
    if (!options.insecure && !is_loopback_address(options.address)) {
      throw std::runtime_error("refusing to talk to the tracker at " + options.address +
                               " in plaintext: pass --tls-ca with the CA of the tracker's certificate, "
                               "or --insecure on a network you trust");
    }
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  // Dead peers and silently dropped paths are noticed by pings, not by waiting.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options.max_reconnect_backoff.count()));
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(options.address, credentials, args);
}

std::unique_ptr<grpc::ClientContext> make_context(const ClientOptions &options, double timeout_seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!options.token.empty()) context->AddMetadata("authorization", "Bearer " + options.token);
  if (timeout_seconds > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(
                              std::chrono::duration<double>(timeout_seconds)));
  }
  return context;
}

grpc::Status check_role(const grpc::ServerContextBase &context, const RoleTokens &tokens, std::optional<Role> role) {
  auto name = [](Role r) { return r == Role::kSubmitter ? "submitter" : "runner"; };
  if (tokens.submitter.empty() && tokens.runner.empty()) return grpc::Status::OK;
  // A server holding one role's token only is refused at start; should one run anyway,
  // its open role admits nobody rather than everybody.
  if (role && tokens.of(*role).empty()) {
    return grpc::Status(grpc::PERMISSION_DENIED, std::string("this server has no ") + name(*role) +
                                                     " token configured, so it accepts no " + name(*role) +
                                                     ": restart it with a token for each role");
  }
  const auto &metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return grpc::Status(grpc::UNAUTHENTICATED, std::string("this tracker requires a token: pass --token-file with the "
                                                           "tracker's ") +
                                                   (role ? name(*role) : "submitter or runner") + " token");
  }
  std::string presented(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  if (presented.rfind(prefix, 0) != 0) return grpc::Status(grpc::UNAUTHENTICATED, "the token was refused");
  presented.erase(0, prefix.size());
  // Every comparison runs, whatever matches: the time taken says nothing of which.
  const bool submitter = !tokens.submitter.empty() && secrets_equal(presented, tokens.submitter);
  const bool runner = !tokens.runner.empty() && secrets_equal(presented, tokens.runner);
  if (role ? (*role == Role::kSubmitter ? submitter : runner) : submitter || runner) return grpc::Status::OK;
  if (role && (submitter || runner)) {
    return grpc::Status(grpc::PERMISSION_DENIED,
                        std::string("this is a ") + name(*role) + "'s call and the token given is the " +
                            name(*role == Role::kSubmitter ? Role::kRunner : Role::kSubmitter) + " token: " +
                            (*role == Role::kSubmitter ? "a runner's token cannot submit jobs; tuners give the "
                                                         "submitter token (the tracker's --submitter-token-file)"
                                                       : "a submitter's token cannot take or report jobs; runners "
                                                         "give the runner token (the tracker's --runner-token-file)"));
  }
  return grpc::Status(grpc::UNAUTHENTICATED, "the token was refused: check --token-file");
}

std::string describe(const grpc::Status &status) {
  std::string text = status.error_message();
  if (text.empty()) text = "no message";
  return text + " (" + code_name(status.error_code()) + ")";
}

}  // namespace kiln::rpc
