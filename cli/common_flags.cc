#include "cli/common_flags.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>

#include "cli/workload_args.h"
#include "support/flag_checks.h"

namespace kiln::cli {

CLI::Option *add_target_option(CLI::App &cmd, std::string &target, const std::string &what,
                               const std::string &default_text) {
  return cmd.add_option("--target", target,
                        what + " (default: " + default_text +
                            "; llvm -mcpu=CPU [-mtriple=T] [-num-cores=N] or cuda -arch=sm_XY, docs/targets.md)");
}

CLI::Option *add_threads_option(CLI::App &cmd, int &threads, const std::string &what) {
  return cmd.add_option("--threads", threads, what + " (0, the default: every core of this host)")
      ->check(support::at_least(0, 1024));
}

void add_compiled_model_option(CLI::App &cmd, std::string &folder) {
  cmd.add_option("--compiled", folder, "REQUIRED: the compiled model folder (kiln compile -o)");
  // The former name; --model is the ONNX file everywhere else.
  cmd.add_option("--model", folder)->group("");
}

void check_compiled_model(const std::string &folder) {
  if (folder.empty()) fail("give the compiled model with --compiled M.kiln (the folder kiln compile -o wrote)");
  std::filesystem::path path(folder);
  if (std::filesystem::is_regular_file(path) && path.extension() == ".onnx")
    fail(folder + " is an ONNX model, not a compiled one: compile it first (kiln compile --model " +
         shell_quote(folder) + " -o " + shell_quote(path.stem().string() + ".kiln") + "), then pass that folder");
}

std::string shell_quote(const std::string &text) {
  bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_-./=:,+@%").find(c) != std::string::npos;
  });
  if (plain) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace kiln::cli
