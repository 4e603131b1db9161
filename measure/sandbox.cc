#include "measure/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace kiln::measure {

namespace {

constexpr uid_t kNobody = 65534;

std::string why(const char *what) { return std::string(what) + ": " + std::strerror(errno); }

// A user namespace maps the caller to itself, so that an unprivileged runner may still
// make a network and a mount namespace.
bool enter_user_namespace() {
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER) != 0) return false;
  auto write = [](const char *file, const std::string &text) {
    std::ofstream out(file);
    out << text;
    return static_cast<bool>(out);
  };
  write("/proc/self/setgroups", "deny");
  return write("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n") &&
         write("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
}

}  // namespace

std::string SandboxReport::summary() const {
  std::string out = std::string(network_isolated ? "no network" : "network NOT isolated") + ", " +
                    (user_dropped ? "as user nobody" : "as the runner's user") + ", " +
                    (files_hidden ? "the runner's secret files hidden" : "the runner's secret files NOT hidden") +
                    (read_only_root ? ", / read-only" : "");
  for (const std::string &line : not_done) out += "; " + line;
  return out;
}

SandboxReport enter_sandbox(const SandboxOptions &options) {
  SandboxReport report;
  if (!options.enabled) return report;
  const bool root = geteuid() == 0;
  // Namespaces first, while the privileges to make them are there.
  bool in_user_namespace = false;
  int flags = CLONE_NEWNET | CLONE_NEWNS;
  if (unshare(flags) != 0) {
    std::string first = why("unshare");
    in_user_namespace = !root && enter_user_namespace();
    if (!in_user_namespace || unshare(flags) != 0) {
      report.not_done.push_back("no network or mount namespace here (" + first +
                                (root ? "" : "; user namespaces: " + why("unshare")) + ")");
      flags = 0;
    }
  }
  report.network_isolated = (flags & CLONE_NEWNET) != 0;
  if ((flags & CLONE_NEWNS) != 0) {
    // Private mounts: what is hidden here stays hidden here only.
    bool ok = mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    for (const std::string &file : options.hidden_files)
      ok = ok && mount("/dev/null", file.c_str(), nullptr, MS_BIND, nullptr) == 0;
    report.files_hidden = ok;
    if (!ok) report.not_done.push_back("cannot hide the runner's files (" + why("mount") + ")");
    // The root file system read-only for the kernel (other mounts, such as /tmp, keep
    // their modes; as nobody it writes only where anyone may).
    report.read_only_root = mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
    if (!report.read_only_root) report.not_done.push_back("the root file system stays writable (" + why("mount") + ")");
  }
  if (root) {
    if (setgroups(0, nullptr) == 0 && setgid(kNobody) == 0 && setuid(kNobody) == 0) {
      report.user_dropped = true;
      // setuid made the process undumpable, which closes /proc/self/fd to it: the
      // artifact kept open by keep_readable is reached through there.
      prctl(PR_SET_DUMPABLE, 1);
      report.files_hidden = true;  // nobody cannot read the runner's 600 files
    } else {
      report.not_done.push_back("cannot become nobody (" + why("setuid") + ")");
    }
  } else if (!report.files_hidden && !options.hidden_files.empty()) {
    report.not_done.push_back(
        "the runner's files stay readable: run the runner as root (candidates then run as "
        "nobody) or where user namespaces are allowed");
  }
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return report;
}

std::string keep_readable(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY);  // not O_CLOEXEC: dlopen opens the /proc path later
  if (fd < 0) return path;
  return "/proc/self/fd/" + std::to_string(fd);
}

SandboxReport probe_sandbox(const SandboxOptions &options) {
  int pipes[2];
  SandboxReport report;
  if (pipe(pipes) != 0) {
    report.not_done.push_back(why("pipe"));
    return report;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(pipes[0]);
    SandboxReport in_child = enter_sandbox(options);
    std::string text = std::string(in_child.network_isolated ? "1" : "0") + (in_child.user_dropped ? "1" : "0") +
                       (in_child.files_hidden ? "1" : "0") + (in_child.read_only_root ? "1" : "0");
    for (const std::string &line : in_child.not_done) text += line + "\n";
    (void)!write(pipes[1], text.data(), text.size());
    _exit(0);
  }
  close(pipes[1]);
  std::string text;
  char buffer[512];
  for (ssize_t n; (n = read(pipes[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  close(pipes[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  if (text.size() < 4) {
    report.not_done.push_back("the sandbox probe failed");
    return report;
  }
  report.network_isolated = text[0] == '1';
  report.user_dropped = text[1] == '1';
  report.files_hidden = text[2] == '1';
  report.read_only_root = text[3] == '1';
  for (size_t at = 4; at < text.size();) {
    size_t end = text.find('\n', at);
    report.not_done.push_back(text.substr(at, end - at));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return report;
}

}  // namespace kiln::measure
