#include "measure/sandbox.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "measure/subprocess.h"

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
                    (read_only_root ? ", / read-only" : "") + (syscalls_filtered ? ", system calls filtered" : "");
  for (const std::string &line : not_done) out += "; " + line;
  return out;
}

namespace {

// ---- The system-call allow-list -------------------------------------------------
//
// A classic BPF program for seccomp, written against the kernel's interface
// (linux/seccomp.h, linux/filter.h): the architecture is checked, then the call number
// is compared with each allowed one. Calls outside the list trap (SIGSYS), and the
// handler reports which one before the child exits. Two filters stack: the first,
// entered with the sandbox, still lets the loader open and map the artifact; the second,
// once it is loaded, keeps what running a kernel needs.

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
constexpr const char *kArchName = "x86-64";
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
constexpr const char *kArchName = "AArch64";
#endif

// What a loaded kernel may call: memory, threads (the runtime's pool), the clock, the
// socket the child reports on, and its own end.
const std::vector<long> &running_calls() {
  static const std::vector<long> calls = {
      __NR_read,
      __NR_write,
      __NR_writev,
      __NR_sendto,
      __NR_sendmsg,
      __NR_close,
      __NR_mmap,
      __NR_munmap,
      __NR_mremap,
      __NR_madvise,
      __NR_mprotect,
      __NR_brk,
      __NR_futex,
      __NR_clone,
      __NR_set_robust_list,
      __NR_rt_sigprocmask,
      __NR_rt_sigreturn,
      __NR_sched_yield,
      __NR_sched_getaffinity,
      __NR_sched_setaffinity,
      __NR_getpid,
      __NR_gettid,
      __NR_clock_gettime,
      __NR_clock_getres,
      __NR_clock_nanosleep,
      __NR_nanosleep,
      __NR_gettimeofday,
      __NR_getrusage,
      __NR_exit,
      __NR_exit_group,
      __NR_restart_syscall,
      __NR_membarrier,
      __NR_prlimit64,
      __NR_getrandom,
#ifdef __NR_clone3
      __NR_clone3,
#endif
#ifdef __NR_rseq
      __NR_rseq,
#endif
#ifdef __NR_futex_waitv
      __NR_futex_waitv,
#endif
#ifdef __NR_getrlimit
      __NR_getrlimit,
#endif
  };
  return calls;
}

// What loading an artifact adds (dlopen: open, stat, read and map the file), and
// replacing a signal handler, which the loader's code may do.
const std::vector<long> &loading_calls() {
  static const std::vector<long> calls = [] {
    std::vector<long> c = running_calls();
    for (long n : {long{__NR_openat}, long{__NR_fstat}, long{__NR_newfstatat}, long{__NR_lseek}, long{__NR_pread64},
                   long{__NR_readlinkat}, long{__NR_getcwd}, long{__NR_faccessat}, long{__NR_fcntl},
                   long{__NR_rt_sigaction}, long{__NR_statx}, long{__NR_seccomp}})
      c.push_back(n);
#ifdef __NR_open
    c.push_back(__NR_open);
#endif
#ifdef __NR_stat
    c.push_back(__NR_stat);
#endif
#ifdef __NR_lstat
    c.push_back(__NR_lstat);
#endif
#ifdef __NR_readlink
    c.push_back(__NR_readlink);
#endif
#ifdef __NR_access
    c.push_back(__NR_access);
#endif
#ifdef __NR_faccessat2
    c.push_back(__NR_faccessat2);
#endif
    return c;
  }();
  return calls;
}

int report_fd = -1;
bool filtered = false;

// Appends `value` in decimal to `out` at `at` (no allocation: called in a signal handler).
size_t put_number(char *out, size_t at, long value) {
  char digits[24];
  size_t n = 0;
  unsigned long v = value < 0 ? 0UL : static_cast<unsigned long>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof digits);
  while (n > 0) out[at++] = digits[--n];
  return at;
}

size_t put_text(char *out, size_t at, const char *text) {
  while (*text) out[at++] = *text++;
  return at;
}

#if defined(__x86_64__) || defined(__aarch64__)
// SIGSYS from the filter: one result frame naming the call, then the child's end.
void on_refused_call(int, siginfo_t *info, void *) {
  if (report_fd >= 0) {
    char payload[400];
    size_t n = put_text(payload, 0,
                        "{\"result\":{\"error\":\"runtime_error\",\"message\":\"the runner's system-call filter "
                        "refused system call ");
    n = put_number(payload, n, info->si_syscall);
    n = put_text(payload, n, " (");
    n = put_text(payload, n, kArchName);
    n = put_text(payload, n, "): a kernel needs memory, threads and the clock only, so the candidate was stopped\"}}");
    uint64_t size = n;
    (void)!write(report_fd, &size, sizeof size);
    (void)!write(report_fd, payload, n);
  }
  _exit(detail::kChildSyscallRefused);
}

// Installs a filter allowing `calls`, and tgkill to this process alone (abort, raise).
bool install_filter(const std::vector<long> &calls) {
  std::vector<sock_filter> program = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  for (long call : calls) {
    program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(call), 0, 1));
    program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_tgkill, 0, 3));
  program.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));
  program.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(getpid()), 0, 1));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
  sock_fprog fprog{static_cast<unsigned short>(program.size()), program.data()};
  // seccomp(2), not prctl: the first filter lets this call through for the second.
  return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0;
}
#endif

// The first filter, with the handler that reports a refused call; "" or why not.
std::string enter_syscall_filter(int socket) {
#if defined(__x86_64__) || defined(__aarch64__)
  report_fd = socket;
  struct sigaction action {};
  action.sa_sigaction = on_refused_call;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGSYS, &action, nullptr) != 0) return why("sigaction");
  if (!install_filter(loading_calls())) return why("seccomp");
  filtered = true;
  return "";
#else
  (void)socket;
  return "no system-call filter for this architecture";
#endif
}

}  // namespace

void restrict_to_running() {
#if defined(__x86_64__) || defined(__aarch64__)
  if (!filtered) return;
  // The runtime's workers start on its first parallel loop, and are named through
  // /proc: start them now, while files may still be opened.
  using TaskFn = int32_t (*)(int64_t, int64_t, void *);
  using ParallelFor = int32_t (*)(int64_t, TaskFn, void *);
  if (auto parallel_for = reinterpret_cast<ParallelFor>(dlsym(RTLD_DEFAULT, "kiln_rt_parallel_for")))
    parallel_for(
        0, [](int64_t, int64_t, void *) -> int32_t { return 0; }, nullptr);
  install_filter(running_calls());
#endif
}

SandboxReport enter_sandbox(const SandboxOptions &options, int report_socket) {
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
  // Last: the filter refuses calls the steps above make.
  if (std::string not_filtered = enter_syscall_filter(report_socket); not_filtered.empty())
    report.syscalls_filtered = true;
  else
    report.not_done.push_back("system calls not filtered (" + not_filtered + ")");
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
                       (in_child.files_hidden ? "1" : "0") + (in_child.read_only_root ? "1" : "0") +
                       (in_child.syscalls_filtered ? "1" : "0");
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
  if (text.size() < 5) {
    report.not_done.push_back("the sandbox probe failed");
    return report;
  }
  report.network_isolated = text[0] == '1';
  report.user_dropped = text[1] == '1';
  report.files_hidden = text[2] == '1';
  report.read_only_root = text[3] == '1';
  report.syscalls_filtered = text[4] == '1';
  for (size_t at = 5; at < text.size();) {
    size_t end = text.find('\n', at);
    report.not_done.push_back(text.substr(at, end - at));
    at = end == std::string::npos ? text.size() : end + 1;
  }
  return report;
}

}  // namespace kiln::measure
