// Candidates run sandboxed where a runner serves a tracker: a kernel that tries the
// network, the runner's token and the file system (fixtures/nosy.c) is refused each
// where this host's kernel lets Kiln refuse it, and the probe says which steps it
// could take. Without the sandbox the same kernel reaches all three, which shows that
// the fixture would notice.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "measure/sandbox.h"
#include "tests/measure/test_util.h"

namespace kiln::measure {
namespace {

using testing::fixture;
using testing::quick_input;
using testing::TempDir;
using testing::test_runner_options;

// What nosy.c's kiln_entry returned ("kiln_entry returned error code N"), 0 for none.
int found_by(const RunResult &r) {
  if (r.ok()) return 0;
  int code = -1;
  size_t at = r.message.find("error code ");
  if (at != std::string::npos) std::sscanf(r.message.c_str() + at + 11, "%d", &code);
  return code;
}

TEST(Sandbox, AKernelCannotReachTheNetworkTheTokenOrTheFiles) {
  TempDir dir;
  // Something on loopback to connect to.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 8), 0);
  socklen_t length = sizeof address;
  getsockname(listener, reinterpret_cast<sockaddr *>(&address), &length);
  // The runner's token, private as token files must be, and a folder of the runner's.
  std::filesystem::path token = dir.path() / "runner.token";
  std::ofstream(token) << "s3cret\n";
  std::filesystem::permissions(token, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::path own = dir.path() / "cache";
  std::filesystem::create_directories(own);
  std::filesystem::permissions(own, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec);
  setenv("KILN_NOSY_PORT", std::to_string(ntohs(address.sin_port)).c_str(), 1);
  setenv("KILN_NOSY_SECRET", token.c_str(), 1);
  setenv("KILN_NOSY_WRITE", (own / "planted").c_str(), 1);

  RunResult open_run;
  {
    LocalRunner runner(test_runner_options(dir));
    open_run = runner.run_one(quick_input(fixture("nosy"), ""));
  }
  EXPECT_EQ(found_by(open_run), 7) << "without the sandbox the kernel reaches all three: "
                                   << testing::describe(open_run);
  std::filesystem::remove(own / "planted");

  LocalRunnerOptions options = test_runner_options(dir);
  options.sandbox.enabled = true;
  options.sandbox.hidden_files = {token.string()};
  SandboxReport report = probe_sandbox(options.sandbox);
  for (const std::string &line : report.not_done) std::printf("[ SKIPPED  ] not on this host: %s\n", line.c_str());
  RunResult boxed;
  {
    LocalRunner runner(options);
    boxed = runner.run_one(quick_input(fixture("nosy"), ""));
  }
  if (report.syscalls_filtered) {
    // Its first try (a socket) is refused by the system-call filter, which stops it and
    // says which call it made.
    EXPECT_EQ(boxed.error, ErrorKind::kRuntimeError) << testing::describe(boxed);
    EXPECT_NE(boxed.message.find("the runner's system-call filter refused system call " + std::to_string(SYS_socket)),
              std::string::npos)
        << testing::describe(boxed);
  } else {
    int found = found_by(boxed);
    ASSERT_GE(found, 0) << testing::describe(boxed);
    EXPECT_EQ((found & 1) != 0, !report.network_isolated) << report.summary();
    EXPECT_EQ((found & 2) != 0, !report.files_hidden) << report.summary();
    // As nobody it cannot create files in the runner's folders (a read-only root alone
    // does not cover a /tmp mounted apart).
    if (report.user_dropped) {
      EXPECT_EQ(found & 4, 0) << report.summary();
    }
    // Root in a container can do it all; say so plainly where it did.
    if (geteuid() == 0 && report.not_done.empty()) {
      EXPECT_EQ(found, 0) << report.summary();
    }
  }
  unsetenv("KILN_NOSY_PORT");
  unsetenv("KILN_NOSY_SECRET");
  unsetenv("KILN_NOSY_WRITE");
  close(listener);
}

}  // namespace
}  // namespace kiln::measure
