// The flags several commands share, declared once so that they read the same
// everywhere: the database, the target, the thread count, the compiled model.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace kiln::cli {

/// The database `kiln tune` and `kiln tune-op` write and `kiln compile` reads by
/// default, in the working directory.
inline constexpr const char *kDefaultDatabase = "kiln.db";

/// The default target's description in every help text: llvm -mcpu=native.
inline constexpr const char *kThisHost = "this host: llvm -mcpu=native, resolved to its CPU's name, e.g. znver4";

/// --target: `what` it is for; empty or "llvm -mcpu=native" means this host.
CLI::Option *add_target_option(CLI::App &cmd, std::string &target, const std::string &what,
                               const std::string &default_text = kThisHost);

/// --threads: `what` uses them; 0 (the default) means every core of the host.
CLI::Option *add_threads_option(CLI::App &cmd, int &threads, const std::string &what);

/// --compiled (kiln run, kiln bench): the folder `kiln compile -o` wrote. `--model`,
/// its former name, is kept as a hidden alias.
void add_compiled_model_option(CLI::App &cmd, std::string &folder);
/// Exits with a message when no compiled model was given, or an ONNX file was.
void check_compiled_model(const std::string &folder);

/// `text` as one word of a POSIX shell command line: as it is when it holds nothing the
/// shell would interpret, else in single quotes.
std::string shell_quote(const std::string &text);

}  // namespace kiln::cli
