// Least privilege for a candidate kernel: a runner executes native code that tuners
// send it, so the child that loads and runs a candidate gives up what the kernel has
// no use for before the artifact is opened: the network (a network namespace of its
// own, with nothing in it), the runner's user when the runner is root (the child
// becomes `nobody`), the files the runner names (its token, hidden behind an empty
// file in a mount namespace of the child's own), and any way back (no_new_privs).
// Each step is taken where the kernel allows it and reported where it does not.
#pragma once

#include <string>
#include <vector>

namespace kiln::measure {

struct SandboxOptions {
  bool enabled = false;
  /// Files a kernel must not read (the runner's token file, its TLS key): hidden in
  /// the child's mount namespace where one can be made, else unreadable by the user the
  /// child runs as (root drops to nobody).
  std::vector<std::string> hidden_files;
};

/// What enter_sandbox did, and what it could not do here (one line each).
struct SandboxReport {
  bool network_isolated = false;
  bool user_dropped = false;  ///< runs as nobody (the runner was root)
  bool files_hidden = false;
  bool read_only_root = false;  ///< the root file system mounted read-only for the kernel
  /// System calls limited to an allow-list (seccomp): loading an artifact may open and
  /// map files; once loaded (restrict_to_running), a kernel may use memory, threads, the
  /// clock and the child's socket only. A call outside the list stops the child
  /// (kChildSyscallRefused, its result frame naming the call).
  bool syscalls_filtered = false;
  std::vector<std::string> not_done;
  std::string summary() const;
};

/// In the candidate's child, before its artifact is opened. Never throws. A call the
/// system-call filter refuses is reported as a result frame on `report_socket` (when
/// given) before the child exits.
SandboxReport enter_sandbox(const SandboxOptions &options, int report_socket = -1);

/// In a sandboxed child once every artifact it runs is loaded: narrows the system-call
/// allow-list to what running a kernel needs (no more files opened, no signal handlers
/// replaced). Does nothing where enter_sandbox installed no filter. Never throws.
void restrict_to_running();

/// A path to `path` that keeps working after enter_sandbox, which may take the right to
/// open it away: the file opened now, reached as /proc/self/fd/N. `path` itself when it
/// cannot be opened (loading it then says why).
std::string keep_readable(const std::string &path);

/// What a sandbox would do in a child of this process, tried in a throwaway child: the
/// runner says it once at start.
SandboxReport probe_sandbox(const SandboxOptions &options);

}  // namespace kiln::measure
