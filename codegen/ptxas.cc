#include "codegen/ptxas.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "codegen/codegen.h"

namespace kiln::codegen {

std::vector<PtxasKernelReport> parse_ptxas_report(const std::string &text) {
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<PtxasKernelReport> reports;
  std::istringstream in(text);
  auto number = [](const std::string &s) -> int64_t {
    // Digits only (the regexes matched \d+); saturate what would not fit.
    return s.size() > 15 ? INT64_C(999999999999999) : std::stoll(s);
  };
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      PtxasKernelReport r;
      r.name = m[1];
      r.arch = m[2];
      reports.push_back(r);
      continue;
    }
    if (reports.empty()) continue;
    PtxasKernelReport &r = reports.back();
    if (std::regex_search(line, m, frame)) {
      r.stack_bytes = number(m[1]);
      r.spill_store_bytes = number(m[2]);
      r.spill_load_bytes = number(m[3]);
    }
    if (std::regex_search(line, m, used)) r.registers = static_cast<int>(std::min<int64_t>(number(m[1]), 1 << 20));
    if (std::regex_search(line, m, smem)) r.shared_bytes = number(m[1]);
  }
  return reports;
}

std::string find_ptxas() {
  if (const char *env = std::getenv("KILN_PTXAS"); env && *env) return env;
  if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return "/usr/local/cuda/bin/ptxas";
  if (const char *path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');) {
      std::string candidate = dir + "/ptxas";
      if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

namespace {

std::string read_file(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv with stdout and stderr into `log`; returns the exit status (-1: not run).
int run_captured(const std::vector<std::string> &argv, const std::filesystem::path &log) {
  // The child must not flush a copy of this process's stdio buffers.
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(126);
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

PtxasResult run_ptxas(const std::string &ptx, const std::string &arch, const std::string &ptxas) {
  if (ptxas.empty())
    throw CodegenError("ptxas not found: install the CUDA toolkit, or set KILN_PTXAS to the ptxas to use");
  std::string pattern = (std::filesystem::temp_directory_path() / "kiln-ptxas-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw CodegenError("cannot create a scratch directory for ptxas in " + pattern);
  std::filesystem::path dir(pattern);
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  {
    std::ofstream out(dir / "kernel.ptx", std::ios::binary);
    out << ptx;
    if (!out) throw CodegenError("cannot write " + (dir / "kernel.ptx").string());
  }
  int status =
      run_captured({ptxas, "-arch=" + arch, "-v", "-o", (dir / "kernel.cubin").string(), (dir / "kernel.ptx").string()},
                   dir / "log");
  PtxasResult result;
  result.log = read_file(dir / "log");
  if (status == 127 || status < 0) throw CodegenError("cannot run " + ptxas + ": " + result.log);
  if (status != 0) throw CodegenError("ptxas refused the PTX for " + arch + ": " + result.log);
  result.cubin = read_file(dir / "kernel.cubin");
  result.kernels = parse_ptxas_report(result.log);
  // The release, once per ptxas.
  static std::mutex mutex;
  static std::map<std::string, std::string> releases;
  std::lock_guard<std::mutex> lock(mutex);
  auto known = releases.find(ptxas);
  if (known == releases.end()) {
    run_captured({ptxas, "--version"}, dir / "version");
    static const std::regex release(R"(release (\d+\.\d+))");
    std::smatch m;
    std::string text = read_file(dir / "version");
    known = releases.emplace(ptxas, std::regex_search(text, m, release) ? m[1].str() : "").first;
  }
  result.toolkit = known->second;
  return result;
}

}  // namespace kiln::codegen
