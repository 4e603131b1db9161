// kiln-measure-server: the runner's fork server as a program of its own, for runners
// whose kernels must run in another process image than the runner's: an AArch64
// build run under qemu-aarch64 (LocalRunnerOptions::server_command), or a server built
// apart from the daemon. The runtime is compiled in and exported, so artifacts resolve
// kiln_rt_* from this executable. Dependency-free apart from libc/libstdc++, so it
// cross-builds with the plain cross compiler.
//
// Usage: kiln-measure-server --fd N [--run-timeout S] [--memory-limit BYTES]
//                            [--threads N] [--reference-cache BYTES]
//                            [--sandbox [--hide FILE]...]  (measure/sandbox.h)
// Serves RunInput frames on descriptor N until the peer closes it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "measure/runner_server.h"

int main(int argc, char **argv) {
  kiln::measure::detail::ServerOptions options;
  int fd = -1;
  for (int i = 1; i < argc; i += 2) {
    const char *flag = argv[i];
    if (std::strcmp(flag, "--sandbox") == 0) {
      options.sandbox.enabled = true;
      --i;  // a switch: no value
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kiln-measure-server: %s needs a value\n", flag);
      return 2;
    }
    const char *value = argv[i + 1];
    if (std::strcmp(flag, "--fd") == 0) {
      fd = std::atoi(value);
    } else if (std::strcmp(flag, "--run-timeout") == 0) {
      options.run_timeout_seconds = std::atof(value);
    } else if (std::strcmp(flag, "--memory-limit") == 0) {
      options.memory_limit_bytes = std::atoll(value);
    } else if (std::strcmp(flag, "--threads") == 0) {
      options.num_threads = std::atoi(value);
    } else if (std::strcmp(flag, "--reference-cache") == 0) {
      options.reference_cache_bytes = std::atoll(value);
    } else if (std::strcmp(flag, "--hide") == 0) {
      options.sandbox.hidden_files.push_back(value);
    } else {
      std::fprintf(stderr, "kiln-measure-server: unknown flag %s\n", flag);
      return 2;
    }
  }
  if (fd < 0) {
    std::fprintf(stderr,
                 "usage: kiln-measure-server --fd N [--run-timeout S] [--memory-limit BYTES] [--threads N] "
                 "[--reference-cache BYTES] [--sandbox [--hide FILE]...]\n");
    return 2;
  }
  kiln::measure::detail::serve(fd, options);
  return 0;
}
