#include "measure/cuda_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "device/cuda_artifact.h"
#include "measure/artifact.h"
#include "measure/subprocess.h"
#include "measure/tensor_data.h"
#include "support/json_read.h"

namespace kiln::measure {

namespace {

struct ToolRun {
  bool timed_out = false;
  int exit_code = -1;  // -1: killed by a signal or not started
  std::string stdout_text, stderr_text;
  double seconds = 0;
};

std::string read_text(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv (exec, never a fork of this process's CUDA state: it has none) with its
// output in files, killing it at the deadline.
ToolRun run_tool(const std::vector<std::string> &argv, const std::filesystem::path &dir, double timeout_seconds) {
  ToolRun r;
  std::filesystem::path out = dir / "stdout", err = dir / "stderr";
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
    setpgid(0, 0);
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (pid < 0) {
    r.stderr_text = "cannot start " + argv[0];
    return r;
  }
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > timeout_seconds) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.timed_out && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.stdout_text = read_text(out);
  r.stderr_text = read_text(err);
  while (!r.stderr_text.empty() && r.stderr_text.back() == '\n') r.stderr_text.pop_back();
  return r;
}

// The bytes of a .npy file kiln-cuda-measure wrote, after its header.
std::string npy_payload(const std::filesystem::path &p) {
  std::string s = read_text(p);
  if (s.size() < 10 || s.compare(0, 6, "\x93NUMPY") != 0) return "";
  size_t header =
      10 + (static_cast<unsigned char>(s[8]) | (static_cast<size_t>(static_cast<unsigned char>(s[9])) << 8));
  return header <= s.size() ? s.substr(header) : "";
}

RunResult failure(ErrorKind kind, std::string message, double seconds) {
  RunResult r;
  r.error = kind;
  r.message = std::move(message);
  r.run_seconds = seconds;
  return r;
}

}  // namespace

std::string default_cuda_measure_command() {
  if (const char *env = std::getenv("KILN_CUDA_MEASURE"); env && *env) return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path beside = self.parent_path() / "kiln-cuda-measure";
    if (access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef KILN_CUDA_MEASURE_PATH
  return KILN_CUDA_MEASURE_PATH;
#else
  return "kiln-cuda-measure";
#endif
}

CudaRunner::CudaRunner(CudaRunnerOptions options) : options_(std::move(options)) {
  if (options_.measure_command.empty()) options_.measure_command = default_cuda_measure_command();
  if (options_.work_dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-cuda-runs-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create a work directory in " + pattern);
    options_.work_dir = pattern;
    owns_work_dir_ = true;
  }
  std::filesystem::create_directories(options_.work_dir);
}

CudaRunner::~CudaRunner() {
  std::error_code ec;
  if (owns_work_dir_) std::filesystem::remove_all(options_.work_dir, ec);
}

std::string CudaRunner::probe() const {
  std::filesystem::path dir = std::filesystem::path(options_.work_dir) / "probe";
  std::filesystem::create_directories(dir);
  ToolRun r = run_tool({options_.measure_command, "--probe", "--device", std::to_string(options_.device)}, dir, 60);
  if (r.exit_code != 0)
    throw std::runtime_error(r.stderr_text.empty() ? "cannot run " + options_.measure_command : r.stderr_text);
  return r.stdout_text;
}

std::string CudaRunner::why_not(const Target &target, std::string *device_name) const {
  std::string arch, device;
  try {
    nlohmann::json probed = kiln::support::parse_json(probe());
    arch = probed.at("arch").get<std::string>();
    device = probed.at("device").get<std::string>();
  } catch (const std::exception &e) {
    return e.what();
  }
  if (device_name) *device_name = device;
  if (arch != target.arch)
    return "the GPU here is " + device + " (" + arch + "), not an " + target.arch +
           ": use the target 'cuda -arch=" + arch + "' (or plain 'cuda'), or a host with an " + target.arch + " GPU";
  return "";
}

std::vector<RunResult> CudaRunner::run(const std::vector<RunInput> &batch) {
  std::vector<RunResult> results;
  for (const RunInput &input : batch) results.push_back(run_one(input));
  return results;
}

RunResult CudaRunner::run_one(const RunInput &input) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  device::CudaArtifact artifact;
  try {
    artifact = device::read_cuda_artifact(input.artifact_path);
  } catch (const std::invalid_argument &e) {
    return failure(ErrorKind::kLoadError, e.what(), elapsed());
  }
  int run_id = next_run_++;
  std::filesystem::path dir = std::filesystem::path(options_.work_dir) / ("run" + std::to_string(run_id));
  std::filesystem::create_directories(dir);
  // The candidate's inputs and outputs go once its result is known.
  struct RemoveDir {
    std::filesystem::path dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_dir{dir};
  // The reference runs once per seed, untimed (one repeat of one run).
  auto measure = [&](const std::string &path, const std::filesystem::path &save, bool timed) {
    std::vector<std::string> argv = {
        options_.measure_command,         path,     "--device",   std::to_string(options_.device), "--seed",
        std::to_string(input.input_seed), "--save", save.string()};
    if (timed) {
      argv.insert(argv.end(), {"--repeats", std::to_string(std::max(1, input.timing.repeat))});
    } else {
      argv.insert(argv.end(), {"--repeats", "1", "--number", "1", "--no-flush"});
    }
    return run_tool(argv, dir, options_.run_timeout_seconds);
  };
  auto classify = [&](const ToolRun &r, const char *what) -> std::optional<RunResult> {
    if (r.timed_out)
      return failure(ErrorKind::kRunTimeout,
                     std::string(what) + " ran longer than " + detail::format_seconds(options_.run_timeout_seconds) +
                         " and was killed",
                     elapsed());
    if (r.exit_code == 0) return std::nullopt;
    std::string message = std::string(what) + ": " + (r.stderr_text.empty() ? "no message" : r.stderr_text);
    if (r.exit_code == 2 || r.exit_code == 3 || r.exit_code == 127)
      return failure(ErrorKind::kLoadError, message, elapsed());
    return failure(ErrorKind::kRuntimeError, message, elapsed());
  };
  ToolRun run = measure(input.artifact_path, dir / "candidate", true);
  if (std::optional<RunResult> bad = classify(run, "the candidate")) return *bad;
  RunResult result;
  try {
    nlohmann::json j = kiln::support::parse_json(run.stdout_text);
    result.repeat_seconds = j.at("seconds").get<std::vector<double>>();
    result.number = j.at("number").get<int64_t>();
  } catch (const std::exception &e) {
    return failure(ErrorKind::kRuntimeError, std::string("unreadable timing from kiln-cuda-measure: ") + e.what(),
                   elapsed());
  }
  if (!input.reference_artifact_path.empty()) {
    auto key = std::make_pair(input.reference_artifact_path, input.input_seed);
    auto cached = reference_dirs_.find(key);
    if (cached == reference_dirs_.end()) {
      std::filesystem::path ref_dir =
          std::filesystem::path(options_.work_dir) / ("reference" + std::to_string(reference_dirs_.size()));
      ToolRun ref = measure(input.reference_artifact_path, ref_dir, false);
      if (std::optional<RunResult> bad = classify(ref, "the reference")) return *bad;
      cached = reference_dirs_.emplace(key, ref_dir.string()).first;
    }
    for (const device::CudaArtifactBuffer &b : artifact.buffers) {
      if (b.role != "output") continue;
      std::string got = npy_payload(dir / "candidate" / (b.name + ".npy"));
      std::string want = npy_payload(std::filesystem::path(cached->second) / (b.name + ".npy"));
      if (got.size() != static_cast<size_t>(b.bytes()) || want.size() != got.size())
        return failure(ErrorKind::kWrongResult, "output '" + b.name + "' missing or of the wrong size", elapsed());
      detail::ParamSpec spec{b.name, b.dtype, b.shape, b.role};
      if (std::optional<std::string> why = detail::compare_buffer(spec, got.data(), want, input.tolerance))
        return failure(ErrorKind::kWrongResult, "output '" + b.name + "': " + *why, elapsed());
    }
  }
  result.run_seconds = elapsed();
  return result;
}

}  // namespace kiln::measure
