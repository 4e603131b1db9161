#include "measure/local_builder_pool.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <system_error>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "codegen/cuda.h"
#include "measure/subprocess.h"
#include "support/json_read.h"

namespace kiln::measure {

struct LocalBuilderPool::Batch {
  const std::vector<BuildInput> *inputs = nullptr;
  std::vector<std::filesystem::path> paths;
  std::vector<BuildResult> results;
  size_t next = 0;
  size_t done = 0;
};

LocalBuilderPool::LocalBuilderPool(int num_workers, std::filesystem::path work_dir, double build_timeout_seconds)
    : LocalBuilderPool(LocalBuilderOptions{.num_workers = num_workers,
                                           .work_dir = std::move(work_dir),
                                           .build_timeout_seconds = build_timeout_seconds}) {}

namespace {
// Whether process `pid` runs: it exists and is no zombie (a killed process whose parent
// has not collected it yet holds its pid for a while).
bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // not readable here: assume it runs
  size_t paren = line.rfind(") ");
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}
}  // namespace

size_t remove_stale_work_dirs(const std::filesystem::path &work_dir) {
  // NAME_PID, PID this process's: a folder of one process.
  const std::string name = work_dir.filename().string();
  const std::string own = "_" + std::to_string(getpid());
  if (name.size() <= own.size() || name.compare(name.size() - own.size(), own.size(), own) != 0) return 0;
  const std::string prefix = name.substr(0, name.size() - own.size() + 1);  // "kiln_tune_"
  std::error_code ec;
  size_t removed = 0;
  for (const auto &entry : std::filesystem::directory_iterator(work_dir.parent_path(), ec)) {
    const std::string other = entry.path().filename().string();
    if (other == name || other.size() <= prefix.size() || other.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = other.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    struct stat info {};
    // Another user's folder is not ours to judge; a live process keeps its own.
    if (pid <= 0 || lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid())
      continue;
    if (process_alive(pid)) continue;
    if (std::filesystem::remove_all(entry.path(), ec) > 0 && !ec) ++removed;
  }
  return removed;
}

namespace {
// The folder remove_on_interrupt's handler removes; empty: none.
char interrupt_dir[4096];

// Removes `name` below the open folder `parent` (AT_FDCWD for an absolute path) with
// what a signal handler may call: openat, getdents64, unlinkat, close.
void remove_tree_at(int parent, const char *name, int depth) {
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    // Entries unlinked while a listing is read may hide others: list again until a
    // pass finds nothing to remove.
    for (int pass = 0; pass < 16 && depth < 16; ++pass) {
      bool removed = false;
      lseek(fd, 0, SEEK_SET);
      alignas(8) char listing[8192];
      for (long n; (n = syscall(SYS_getdents64, fd, listing, sizeof listing)) > 0;) {
        for (long at = 0; at < n;) {
          // getdents64's records are laid out as glibc's struct dirent64.
          const auto *entry = reinterpret_cast<const struct dirent64 *>(listing + at);
          at += entry->d_reclen;
          if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
          // A file system that does not say the type (DT_UNKNOWN): a folder refuses unlink.
          if (entry->d_type == DT_DIR || (unlinkat(fd, entry->d_name, 0) != 0 && errno == EISDIR))
            remove_tree_at(fd, entry->d_name, depth + 1);
          removed = true;
        }
      }
      if (!removed) break;
    }
    close(fd);
  }
  unlinkat(parent, name, AT_REMOVEDIR);
}

extern "C" void remove_interrupt_dir_and_end(int sig) {
  int saved_errno = errno;
  if (interrupt_dir[0] != '\0') remove_tree_at(AT_FDCWD, interrupt_dir, 0);
  errno = saved_errno;
  signal(sig, SIG_DFL);
  raise(sig);
}
}  // namespace

void remove_on_interrupt(const std::filesystem::path &dir) {
  std::string path = std::filesystem::absolute(dir).string();
  if (path.size() >= sizeof interrupt_dir) throw std::invalid_argument("work folder path too long: " + path);
  // Handlers off while the path changes.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  std::memcpy(interrupt_dir, path.c_str(), path.size() + 1);
  signal(SIGINT, remove_interrupt_dir_and_end);
  signal(SIGTERM, remove_interrupt_dir_and_end);
}

LocalBuilderPool::LocalBuilderPool(LocalBuilderOptions options)
    : options_(std::move(options)), lock_(options_.lock_path, options_.lock_wait_seconds) {
  if (options_.num_workers < 1) throw std::invalid_argument("a builder pool needs at least one worker");
  if (options_.work_dir.empty()) throw std::invalid_argument("a builder pool needs a work directory");
  remove_stale_work_dirs(options_.work_dir);
  std::filesystem::create_directories(options_.work_dir);
  // All compilers are made here, before any worker runs: a worker forks for each build,
  // and no other thread should be inside LLVM's initialization at that moment.
  for (int i = 0; i < options_.num_workers; ++i) compilers_.push_back(std::make_unique<codegen::Compiler>());
  for (int i = 0; i < options_.num_workers; ++i) {
    workers_.emplace_back([this, i] { worker_loop(*compilers_[static_cast<size_t>(i)]); });
  }
}

LocalBuilderPool::~LocalBuilderPool() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread &worker : workers_) worker.join();
}

static std::string sanitize_name(const std::string &name) {
  if (name.empty()) return "candidate";
  std::string safe = name;
  for (char &c : safe) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) c = '_';
  }
  if (safe[0] == '.') safe[0] = '_';  // no hidden files, no ".."
  return safe;
}

// Same-named inputs of one batch get "-1", "-2", ... so they never overwrite each other.
static std::vector<std::filesystem::path> artifact_paths(const std::vector<BuildInput> &batch,
                                                         const std::filesystem::path &dir) {
  std::map<std::string, int> seen;
  std::vector<std::filesystem::path> paths;
  for (const BuildInput &input : batch) {
    std::string name = sanitize_name(input.name);
    int count = seen[name]++;
    if (count > 0) name += "-" + std::to_string(count);
    paths.push_back(dir / (name + input.target.backend().artifact_extension()));
  }
  return paths;
}

std::vector<BuildResult> LocalBuilderPool::build(const std::vector<BuildInput> &batch) {
  std::lock_guard<std::mutex> one_batch(batch_mutex_);
  Batch work;
  work.inputs = &batch;
  work.paths = artifact_paths(batch, options_.work_dir);
  work.results.resize(batch.size());
  if (batch.empty()) return {};
  std::unique_lock<std::mutex> lock(mutex_);
  current_ = &work;
  work_ready_.notify_all();
  work_done_.wait(lock, [&] { return work.done == batch.size(); });
  current_ = nullptr;
  return std::move(work.results);
}

void LocalBuilderPool::worker_loop(codegen::Compiler &compiler) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return stopping_ || (current_ && current_->next < current_->inputs->size()); });
    if (stopping_) return;
    Batch &work = *current_;
    size_t index = work.next++;
    lock.unlock();
    BuildResult result = build_one(compiler, (*work.inputs)[index], work.paths[index]);
    lock.lock();
    work.results[index] = std::move(result);
    if (++work.done == work.inputs->size()) work_done_.notify_all();
  }
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The child's report: {"ok": true} or {"error": "build_error", "message": ...}.
nlohmann::json build_and_report(codegen::Compiler &compiler, const BuildInput &input, const std::string &path) {
  try {
    compiler.build_artifact(input.func, input.target, path, input.needs_runtime_library);
    return {{"ok", true}};
  } catch (const codegen::CodegenError &e) {
    return {{"ok", false}, {"message", std::string("codegen rejected the program: ") + e.what()}};
  } catch (const std::exception &e) {
    return {{"ok", false}, {"message", std::string("the compiler failed: ") + e.what()}};
  }
}

void remove_quietly(const std::filesystem::path &path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

}  // namespace

// Builds write to a temporary name and are renamed into place only when complete, so
// an artifact_path always names a whole library, never one a killed build left half
// written.
BuildResult LocalBuilderPool::build_one(codegen::Compiler &compiler, const BuildInput &input,
                                        const std::filesystem::path &path) {
  std::string name = input.name.empty() ? path.filename().string() : input.name;
  std::filesystem::path temp = path;
  temp += ".tmp" + std::to_string(getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(&compiler));
  BuildResult result;
  MeasurementLock::Guard shared = lock_.shared();

  nlohmann::json report;
  if (options_.isolate_builds) {
    detail::ChildRun run = detail::run_in_child(
        [&](int socket) {
          if (options_.build_memory_limit_mb > 0) detail::limit_address_space(options_.build_memory_limit_mb << 20);
          detail::write_frame(socket, build_and_report(compiler, input, temp.string()).dump());
        },
        options_.build_timeout_seconds);
    result.build_seconds = run.exit.seconds;
    if (run.exit.timed_out) {
      remove_quietly(temp);
      result.error = ErrorKind::kBuildTimeout;
      result.message = "building '" + name + "' took longer than the " +
                       detail::format_seconds(options_.build_timeout_seconds) + " build timeout and was killed";
      return result;
    }
    if (!run.frames.empty()) report = kiln::support::parse_json_or_discarded(run.frames.back());
    if (!report.is_object()) {
      remove_quietly(temp);
      result.error = ErrorKind::kBuildError;
      result.message = "the compiler " +
                       (run.exit.signal ? "crashed with " + detail::signal_name(run.exit.signal)
                                        : "exited with code " + std::to_string(run.exit.exit_code)) +
                       " after " + detail::format_seconds(run.exit.seconds) + " while building '" + name + "'";
      return result;
    }
  } else {
    Clock::time_point start = Clock::now();
    report = build_and_report(compiler, input, temp.string());
    result.build_seconds = seconds_since(start);
    if (report.value("ok", false) && result.build_seconds > options_.build_timeout_seconds) {
      remove_quietly(temp);
      result.error = ErrorKind::kBuildTimeout;
      result.message = "building '" + name + "' took " + detail::format_seconds(result.build_seconds) +
                       ", longer than the " + detail::format_seconds(options_.build_timeout_seconds) + " build timeout";
      return result;
    }
  }

  if (!report.value("ok", false)) {
    remove_quietly(temp);
    result.error = ErrorKind::kBuildError;
    result.message = "building '" + name + "': " + report.value("message", std::string("unknown error"));
    return result;
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) {
    remove_quietly(temp);
    result.error = ErrorKind::kBuildError;
    result.message = "building '" + name + "': the compiler reported success but " + path.string() +
                     " could not be put in place: " + error.message();
    return result;
  }
  result.artifact_path = path.string();
  return result;
}

}  // namespace kiln::measure
