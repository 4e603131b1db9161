// Starts kiln_db_test_writer as a child process with its stdout on a pipe.

#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

extern char **environ;

namespace kiln::db::testing {

class WriterProcess {
 public:
  WriterProcess(const std::string &db, int writer, int batches, int batch_size) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    std::vector<std::string> args = {KILN_DB_TEST_WRITER, db, std::to_string(writer), std::to_string(batches),
                                     std::to_string(batch_size)};
    std::vector<char *> argv;
    for (std::string &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (rc != 0) {
      close(fds[0]);
      throw std::runtime_error("cannot start " + args[0]);
    }
    out_ = fdopen(fds[0], "r");
  }
  ~WriterProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      wait();
    }
    if (out_) fclose(out_);
  }
  WriterProcess(const WriterProcess &) = delete;

  /// The next "committed N" report; -1 at end of output.
  int next_committed_batch() {
    char line[128];
    int batch = -1;
    while (fgets(line, sizeof line, out_))
      if (std::sscanf(line, "committed %d", &batch) == 1) return batch;
    return -1;
  }

  void kill_now() { kill(pid_, SIGKILL); }

  /// Waits for exit; returns the exit code, or 128 + signal.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  FILE *out_ = nullptr;
};

}  // namespace kiln::db::testing
