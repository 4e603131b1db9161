// What the tracker's and the runner's own inputs are checked against before anything
// connects: token files, HOST:PORT addresses, keys and runner ids.
#include "rpc/connection.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "rpc/remote_runner.h"

namespace kiln::rpc {
namespace {

namespace fs = std::filesystem;

class TokenFile : public ::testing::Test {
 protected:
  TokenFile() : path_(fs::temp_directory_path() / ("kiln-token-test-" + std::to_string(getpid()))) {}
  ~TokenFile() override { fs::remove(path_); }
  const fs::path &write(const std::string &bytes) {
    std::ofstream(path_, std::ios::binary) << bytes;
    fs::permissions(path_, fs::perms::owner_read | fs::perms::owner_write);
    return path_;
  }
  std::string refusal(const fs::path &path) {
    try {
      read_token_file(path);
    } catch (const std::runtime_error &e) {
      return e.what();
    }
    return "";
  }
  fs::path path_;
};

TEST_F(TokenFile, TheFirstLineWithoutItsBlanksAndLineEnding) {
  EXPECT_EQ(read_token_file(write("  s3cret-token\r\nsecond line\n")), "s3cret-token");
  EXPECT_EQ(read_token_file(write("no-newline")), "no-newline");
}

TEST_F(TokenFile, BytesGrpcCannotSendAreRefusedWithAMessage) {
  // A NUL in the header made gRPC abort the runner.
  EXPECT_NE(refusal(write(std::string("abc\0def\n", 8))).find("must be visible ASCII"), std::string::npos);
  EXPECT_NE(refusal(write("two words\n")).find("must be visible ASCII"), std::string::npos);
  EXPECT_NE(refusal(write("caf\xc3\xa9\n")).find("must be visible ASCII"), std::string::npos);
  EXPECT_NE(refusal(write(" \t\r\n")).find("is empty"), std::string::npos);
}

// A token others can read is refused with the fix; the owner's alone is taken.
TEST_F(TokenFile, OtherUsersMustNotReadIt) {
  write("s3cret\n");
  for (fs::perms others : {fs::perms::group_read, fs::perms::others_read}) {
    fs::permissions(path_, fs::perms::owner_read | fs::perms::owner_write | others);
    std::string why = refusal(path_);
    EXPECT_NE(why.find("may be read by other users"), std::string::npos) << why;
    EXPECT_NE(why.find("chmod 600 " + path_.string()), std::string::npos) << why;
  }
  fs::permissions(path_, fs::perms::owner_read);
  EXPECT_EQ(read_token_file(path_), "s3cret");
}

TEST_F(TokenFile, AnEndlessFileIsRefusedAfterItsFirstKilobytes) {
  EXPECT_NE(refusal("/dev/zero").find("longer than 4096 bytes"), std::string::npos);
  EXPECT_NE(refusal(write(std::string(kMaxTokenBytes + 1, 'a'))).find("longer than"), std::string::npos);
  EXPECT_EQ(read_token_file(write(std::string(kMaxTokenBytes, 'a'))).size(), kMaxTokenBytes);
}

std::string address_refusal(const std::string &text, bool allow_any_port = false) {
  try {
    parse_host_port(text, "--tracker", allow_any_port);
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "";
}

TEST(HostPort, HostsAndPortsInRange) {
  HostPort v4 = parse_host_port("127.0.0.1:9190", "--tracker");
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.port, 9190);
  HostPort v6 = parse_host_port("[::1]:1", "--tracker");
  EXPECT_EQ(v6.host, "[::1]");
  EXPECT_EQ(v6.port, 1);
  EXPECT_EQ(parse_host_port("tracker.lan:65535", "--tracker").port, 65535);
  EXPECT_EQ(parse_host_port("127.0.0.1:0", "--listen", /*allow_any_port=*/true).port, 0);
}

// gRPC itself reads "host:" as port 443 and "host:99999" as another port.
TEST(HostPort, WhatGrpcWouldMisreadIsRefused) {
  EXPECT_NE(address_refusal("127.0.0.1").find("has no port"), std::string::npos);
  EXPECT_NE(address_refusal("127.0.0.1:").find("no port number"), std::string::npos);
  EXPECT_NE(address_refusal("127.0.0.1:99999").find("outside 1 to 65535"), std::string::npos);
  EXPECT_NE(address_refusal("127.0.0.1:0").find("outside 1 to 65535"), std::string::npos);
  EXPECT_NE(
      address_refusal("127.0.0.1:-1").find("has '-1' where the port goes: a port is a whole number from 1 to 65535"),
      std::string::npos);
  EXPECT_NE(address_refusal("localhost:abc").find("has 'abc' where the port goes"), std::string::npos);
  EXPECT_NE(address_refusal("").find("has no port"), std::string::npos);
  EXPECT_NE(address_refusal(":9190").find("has no host"), std::string::npos);
  EXPECT_NE(address_refusal("::1:9190").find("without brackets"), std::string::npos);
  EXPECT_NE(address_refusal("[::g]:9190").find("malformed IPv6"), std::string::npos);
  EXPECT_NE(address_refusal("bad\x1b[31mhost:1").find("no host name or address has"), std::string::npos);
  EXPECT_NE(address_refusal("127.0.0.1:99999").find("give HOST:PORT"), std::string::npos);
}

TEST(Names, KeysAndIdsUseOneAlphabet) {
  EXPECT_EQ(why_not_a_name("jetson-orin_2.local"), "");
  EXPECT_EQ(why_not_a_name(std::string(kMaxNameBytes, 'k')), "");
  EXPECT_EQ(why_not_a_name(""), "is empty");
  EXPECT_NE(why_not_a_name(std::string(kMaxNameBytes + 1, 'k')), "");
  EXPECT_NE(why_not_a_name("a\x1b[31mred"), "");
  EXPECT_NE(why_not_a_name("a/b"), "");
  EXPECT_NE(why_not_a_name("line\nbreak"), "");
}

TEST(TrackerUri, TheAddressAndTheKeyAreChecked) {
  TrackerUri uri = parse_tracker_uri("tracker://10.0.0.2:9190/jetson-orin");
  EXPECT_EQ(uri.address, "10.0.0.2:9190");
  EXPECT_EQ(uri.key, "jetson-orin");
  EXPECT_THROW(parse_tracker_uri("tracker://10.0.0.2:99999/cpu"), std::invalid_argument);
  EXPECT_THROW(parse_tracker_uri("tracker://10.0.0.2:9190/a/b"), std::invalid_argument);
  EXPECT_THROW(parse_tracker_uri("tracker://10.0.0.2:9190/k\x1b"), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::rpc
