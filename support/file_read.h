// Opening files a user named. A bare std::ifstream opens a directory without complaint
// and then fails on the first read with "basic_filebuf::underflow … Is a directory";
// these helpers say which file, as what, and why it cannot be read, before reading.
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "support/json_read.h"

namespace kiln::support {

/// `path`, opened for reading; `what` names it in messages ("workload file", "trace").
/// Throws std::invalid_argument for a missing, unreadable or non-regular file.
inline std::ifstream open_input_file(const std::string &path, const std::string &what,
                                     std::ios::openmode mode = std::ios::in) {
  std::error_code ec;
  std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (path.empty()) throw std::invalid_argument(what + ": the path is empty; name a file");
  if (status.type() == std::filesystem::file_type::not_found)
    throw std::invalid_argument(what + " '" + path + "' does not exist");
  if (status.type() == std::filesystem::file_type::directory)
    throw std::invalid_argument(what + " '" + path + "' is a directory; name a file");
  std::ifstream in(path, mode);
  if (!in) {
    int error = errno;
    throw std::invalid_argument("cannot read " + what + " '" + path + "'" +
                                (error != 0 ? std::string(": ") + std::strerror(error) : std::string()));
  }
  return in;
}

/// The JSON document in `path` (parse_json: nesting bounded); a file that is not JSON
/// throws std::invalid_argument naming it.
inline nlohmann::json read_json_file(const std::string &path, const std::string &what) {
  std::ifstream in = open_input_file(path, what);
  try {
    return parse_json(in);
  } catch (const nlohmann::json::exception &e) {
    throw std::invalid_argument(what + " '" + path + "' is not valid JSON: " + e.what());
  }
}

}  // namespace kiln::support
