#include "cli/common_flags.h"
#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include "cli/compiled_model_files.h"
#include "frontend/graph.h"
#include "support/flag_checks.h"

namespace kiln::cli {

namespace {

/// A tensor argument of `kiln run`: NAME=FILE, or FILE alone (matched by position).
struct NamedFile {
  std::string name, path;
};

std::string list_names(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

/// Splits "NAME=FILE" where NAME is one of `names`; anything else is a path alone (file
/// names may hold '='). A "WORD=FILE" whose WORD names nothing and holds no '/' is a
/// misspelled name unless the whole text is an existing file: refused, listing the
/// names (else `--output nosuch=x.npy` would write a file named "nosuch=x.npy").
NamedFile split_named(const std::string &text, const std::vector<std::string> &names, const std::string &flag,
                      const char *kind) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  std::string name = text.substr(0, eq);
  if (std::find(names.begin(), names.end(), name) != names.end()) return {name, text.substr(eq + 1)};
  std::error_code ec;
  if (name.find('/') == std::string::npos && !std::filesystem::exists(text, ec))
    fail(flag + " '" + text + "': the model has no " + kind + " '" + name + "'; its " + kind + "s are " +
         list_names(names) + " (a file whose name holds '=' is given as ./" + text + ")");
  return {"", text};
}

/// One file per name: named ones by name, the rest in order of the names left. Exits with
/// a message when a name is given twice, files are left over, or (with `all`) missing.
std::vector<std::string> match_files(const std::vector<std::string> &args, const std::vector<std::string> &names,
                                     const std::string &flag, const char *kind, bool all) {
  std::vector<std::string> files(names.size());
  std::vector<std::string> positional;
  for (const std::string &arg : args) {
    NamedFile f = split_named(arg, names, flag, kind);
    // An empty path would be skipped: nothing written, nothing compared, exit 0.
    if (f.path.empty()) fail(flag + " '" + arg + "' names no file");
    if (f.name.empty()) {
      positional.push_back(f.path);
      continue;
    }
    auto k = static_cast<size_t>(std::find(names.begin(), names.end(), f.name) - names.begin());
    if (!files[k].empty()) fail(flag + " names '" + f.name + "' twice");
    files[k] = f.path;
  }
  size_t next = 0;
  for (const std::string &path : positional) {
    while (next < files.size() && !files[next].empty()) ++next;
    if (next == files.size()) {
      fail(flag + " '" + path + "' is one more file than the model has (" + list_names(names) +
           "); name each with NAME=FILE");
    }
    files[next++] = path;
  }
  if (all) {
    for (size_t k = 0; k < files.size(); ++k) {
      if (files[k].empty()) {
        fail("no " + flag + " for '" + names[k] + "'; the model's inputs are " + list_names(names) +
             ": give each with " + flag + " NAME=FILE (or files in that order)");
      }
    }
  }
  return files;
}

/// A file name for a tensor's name: characters a path must not hold become '_'.
std::string file_name_for(const std::string &name) {
  std::string out = name.empty() ? "output" : name;
  for (char &c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  if (out == "." || out == "..") out = "output";
  return out + ".npy";
}

}  // namespace

std::string format_ms(double ms) {
  char text[32];
  if (ms >= 1)
    std::snprintf(text, sizeof text, "%.3f ms", ms);
  else
    std::snprintf(text, sizeof text, "%.1f us", ms * 1e3);
  return text;
}

void add_run_command(CLI::App &app) {
  struct RunArgs {
    std::string model;
    std::vector<std::string> inputs, outputs, compares;
    double tolerance = 1e-4;
  };
  auto args = std::make_shared<RunArgs>();
  auto *cmd = app.add_subcommand("run", "Run a compiled model once on input files");
  add_compiled_model_option(*cmd, args->model);
  cmd->add_option("--input", args->inputs,
                  "an input: NAME=FILE, or FILE for the inputs in order; a .npy file (C order; float64 converts "
                  "to float32, int64 to narrower integers when every value fits) or raw little-endian bytes in the "
                  "input's shape. Repeat once per input")
      ->required();
  cmd->add_option("--output", args->outputs,
                  "where outputs go: NAME=FILE, FILE for the outputs in order (.npy when the name ends in .npy, "
                  "else raw), or an existing folder (each output as NAME.npy there). Repeatable");
  cmd->add_option("--compare", args->compares,
                  "reference outputs (.npy or raw), NAME=FILE or FILE in order: print the errors, fail beyond "
                  "--tolerance. Repeatable");
  cmd->add_option("--tolerance", args->tolerance, "largest relative L2 error --compare accepts")
      ->capture_default_str()
      ->check(finite_range(0, 1e6));
  cmd->callback([args] {
    check_compiled_model(args->model);
    // A model with dynamic dimensions takes .npy inputs of any shape in its ranges.
    std::optional<executor::Model> model;
    std::optional<executor::DynamicModel> dynamic;
    std::vector<std::string> in_names, out_names;
    if (executor::is_dynamic_model(args->model)) {
      dynamic.emplace(load_dynamic_model(args->model));
      for (const executor::DynamicTensor &t : dynamic->manifest().inputs) in_names.push_back(t.name);
      for (const executor::DynamicTensor &t : dynamic->manifest().outputs) out_names.push_back(t.name);
    } else {
      model.emplace(load_compiled_model(args->model));
      in_names = model->input_names();
      out_names = model->output_names();
    }
    std::vector<std::string> in_files = match_files(args->inputs, in_names, "--input", "input", /*all=*/true);
    std::vector<ir::HostTensor> inputs;
    for (size_t k = 0; k < in_files.size(); ++k) {
      if (!dynamic) {
        inputs.push_back(read_tensor(in_files[k], model->input_types()[k]));
        continue;
      }
      const executor::DynamicManifest &m = dynamic->manifest();
      std::vector<int64_t> maxima;
      for (const executor::DynamicDim &d : m.dims) maxima.push_back(d.max);
      int64_t max_elements = 1;
      for (int64_t extent : executor::DynamicManifest::shape_at(m.inputs[k], maxima)) max_elements *= extent;
      inputs.push_back(read_npy(in_files[k], m.inputs[k].dtype, max_elements));
    }
    // Every file named before the model runs: a misspelled name costs no inference.
    std::vector<std::string> out_files;
    std::error_code ec;
    if (args->outputs.size() == 1 && std::filesystem::is_directory(args->outputs[0], ec)) {
      for (const std::string &name : out_names)
        out_files.push_back((std::filesystem::path(args->outputs[0]) / file_name_for(name)).string());
    } else {
      out_files = match_files(args->outputs, out_names, "--output", "output", /*all=*/false);
    }
    // An output written over an input file would destroy the input.
    for (size_t o = 0; o < out_files.size(); ++o) {
      for (size_t k = 0; k < in_files.size() && !out_files[o].empty(); ++k) {
        std::error_code ec2;
        if (std::filesystem::equivalent(out_files[o], in_files[k], ec2))
          fail("--output would write output '" + out_names[o] + "' over input file '" + in_files[k] +
               "': give the output another file");
      }
    }
    // Two outputs written to one file would keep only the last.
    for (size_t o = 0; o < out_files.size(); ++o) {
      for (size_t p = 0; p < o && !out_files[o].empty(); ++p) {
        if (out_files[p].empty()) continue;
        std::error_code ec1, ec2;
        if (std::filesystem::weakly_canonical(out_files[p], ec1) ==
            std::filesystem::weakly_canonical(out_files[o], ec2))
          fail("--output sends outputs '" + out_names[p] + "' and '" + out_names[o] + "' to one file, '" +
               out_files[o] + "': give each its own");
      }
    }
    // A destination that cannot be written is refused before the run, not after it.
    for (size_t o = 0; o < out_files.size(); ++o) {
      if (out_files[o].empty()) continue;
      namespace fs = std::filesystem;
      std::error_code ec;
      fs::path parent = fs::path(out_files[o]).parent_path();
      if (parent.empty()) parent = ".";
      if (fs::is_directory(out_files[o], ec))
        fail("--output '" + out_files[o] + "' for output '" + out_names[o] +
             "' is a directory; name a file, or give the directory as the only --output");
      if (!fs::is_directory(parent, ec))
        fail("--output '" + out_files[o] + "' for output '" + out_names[o] + "': the folder '" + parent.string() +
             "' does not exist; create it first");
      if (access(parent.c_str(), W_OK) != 0)
        fail("--output '" + out_files[o] + "' for output '" + out_names[o] + "': the folder '" + parent.string() +
             "' is not writable: " + std::strerror(errno));
    }
    std::vector<std::string> compare_files =
        match_files(args->compares, out_names, "--compare", "output", /*all=*/false);
    auto start = std::chrono::steady_clock::now();
    std::vector<ir::HostTensor> outputs;
    try {
      outputs = dynamic ? dynamic->run(inputs) : model->run(inputs);
    } catch (const executor::ModelError &e) {
      fail(e.what());
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::printf("output '%s': %s %s\n", support::printable(out_names[o]).c_str(),
                  frontend::shape_string(outputs[o].shape()).c_str(), ir::dtype_name(outputs[o].dtype()));
    }
    std::printf("ran in %s\n", format_ms(ms).c_str());

    for (size_t o = 0; o < out_files.size(); ++o) {
      if (out_files[o].empty()) continue;
      try {
        executor::write_tensor_file(out_files[o], outputs[o]);
      } catch (const executor::TensorFileError &e) {
        fail(e.what());
      }
    }
    bool all_within = true;
    for (size_t o = 0; o < compare_files.size(); ++o) {
      if (compare_files[o].empty()) continue;
      const ir::HostTensor &out = outputs[o];
      ir::HostTensor want = read_tensor(compare_files[o], {out.shape(), out.dtype()});
      double max_abs = 0;
      for (int64_t i = 0; i < out.size(); ++i) {
        const double got = out.get(i), wanted = want.get(i);
        if (std::isnan(got) && std::isnan(wanted)) continue;  // NaN where NaN is expected
        const double error = std::fabs(got - wanted);
        // A NaN against a number is the largest error there is (std::max would drop it).
        if (std::isnan(error) || std::isnan(max_abs))
          max_abs = std::numeric_limits<double>::quiet_NaN();
        else
          max_abs = std::max(max_abs, error);
      }
      double rel = ir::relative_l2_error(out, want);
      std::printf("compare '%s': max abs error %.3g, relative L2 error %.3g (tolerance %.3g)\n",
                  support::printable(out_names[o]).c_str(), max_abs, rel, args->tolerance);
      if (!(rel <= args->tolerance)) {
        std::fprintf(stderr, "kiln: error: output '%s' differs from '%s' beyond the tolerance\n",
                     support::printable(out_names[o]).c_str(), support::printable(compare_files[o]).c_str());
        all_within = false;
      }
    }
    if (!all_within) throw CLI::RuntimeError(1);
  });
}

}  // namespace kiln::cli
