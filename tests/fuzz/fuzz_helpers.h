// What several fuzz targets need: a private folder for the files a parser reads, and a
// property check whose failure is a finding.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace kiln::testing {

/// A folder of its own under the temporary directory, removed at exit.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string &name)
      : path_(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder &) = delete;
  ScratchFolder &operator=(const ScratchFolder &) = delete;
  const std::filesystem::path &path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// A broken property: an exception no parser throws, so it escapes as a finding.
inline void require(bool holds, const std::string &what) {
  if (!holds) throw std::logic_error(what);
}

}  // namespace kiln::testing
