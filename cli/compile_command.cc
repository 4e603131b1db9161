#include "cli/common_flags.h"
#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include "cli/pipeline_args.h"
#include "executor/compile.h"
#include "executor/model.h"
#include "measure/local_builder_pool.h"
#include "search/space.h"
#include "support/flag_checks.h"

namespace kiln::cli {

namespace {

// Builds each artifact in a child process with the tuner's builder limits (a timeout,
// an address-space cap): a database record whose program makes LLVM run away is then a
// build error, which the compile passes over, not the end of the compile. The pool's
// folder is beside the output, so finished artifacts move into it by a rename.
executor::BuildArtifact isolated_builder(measure::LocalBuilderPool &pool) {
  return [&pool](const ir::PrimFunc &func, const Target &target, const std::string &path) {
    std::vector<measure::BuildResult> built = pool.build({{func, target, "step", /*needs_runtime_library=*/true}});
    if (!built.at(0).ok()) throw std::runtime_error(built[0].message);
    std::error_code ec;
    std::filesystem::rename(built[0].artifact_path, path, ec);
    if (ec) {
      std::filesystem::copy_file(built[0].artifact_path, path, std::filesystem::copy_options::overwrite_existing);
      std::filesystem::remove(built[0].artifact_path, ec);
    }
  };
}

}  // namespace

void add_compile_command(CLI::App &app) {
  auto args = std::make_shared<PipelineArgs>();
  auto options = std::make_shared<executor::CompileOptions>();
  auto out = std::make_shared<std::string>();
  auto *cmd = app.add_subcommand("compile",
                                 "Compile an ONNX model into a folder that kiln run loads: each subgraph with "
                                 "its best schedule in the database, or the untuned default");
  add_pipeline_flags(*cmd, *args);
  options->db_path = kDefaultDatabase;
  auto db_flag = cmd->add_option("--db", options->db_path,
                                 "tuning database to take schedules from, as kiln tune's (default: kiln.db when "
                                 "that file exists, else every subgraph untuned)");
  auto no_db = std::make_shared<bool>(false);
  cmd->add_flag("--no-db", *no_db, "use no database: every subgraph gets the untuned default")->excludes(db_flag);
  add_target_option(*cmd, options->target, "the target to build for");
  cmd->add_option("-o,--output", *out,
                  "output folder, e.g. m.kiln (an existing compiled model there is replaced; any other folder is "
                  "left alone and refused)")
      ->required();
  cmd->add_option("--choose-in-model", options->choose_in_model,
                  "also build each tuned step's next N programs in the database (within 30% of its best) and time "
                  "them inside the compiled model, over the step and the two after it; one at least 2% faster "
                  "there replaces the best (0: off)")
      ->capture_default_str()
      ->check(at_least(0, 64));
  auto threads = std::make_shared<int>(0);
  add_threads_option(*cmd, *threads,
                     "threads to time programs with for --choose-in-model: those the model will run with");
  cmd->callback([args, options, out, threads, db_flag, no_db] {
    bool default_db_missing = false;
    if (*no_db) {
      options->db_path.clear();
    } else if (db_flag->count() == 0 && !std::filesystem::exists(options->db_path)) {
      default_db_missing = true;
      options->db_path.clear();
    } else if (!std::filesystem::is_regular_file(options->db_path)) {
      fail("--db " + options->db_path +
           ": no such database file; give the file kiln tune wrote (its --db), or "
           "--no-db to compile every subgraph untuned");
    }
    std::filesystem::path out_path(*out);
    while (!out_path.empty() && !out_path.has_filename() && out_path != out_path.parent_path())
      out_path = out_path.parent_path();
    if (!out_path.has_filename())
      fail("-o '" + *out + "' names no folder to create: give the compiled model's folder, e.g. -o model.kiln");
    {
      // Where the model cannot go is said before the model is imported and built (missing
      // folders above it are created, as mkdir -p does).
      namespace fs = std::filesystem;
      std::error_code ec;
      if (fs::is_symlink(fs::symlink_status(out_path, ec))) {
        if (fs::file_status target = fs::status(out_path, ec); ec && !fs::exists(target))
          fail("-o '" + *out + "' is a symbolic link that leads nowhere (" + ec.message() +
               "): remove it or choose another folder");
      }
    }
    const bool dynamic = has_dynamic_dims(*args);
    std::optional<DynamicPlan> plan;
    frontend::PreparedModel model;
    if (dynamic)
      plan = plan_dynamic(*args);
    else
      model = prepare_model(*args);
    options->untuned_schedule = search::untuned_schedule;
    std::filesystem::path build_dir = out_path;
    build_dir += ".build." + std::to_string(getpid());
    measure::LocalBuilderOptions builder;
    builder.num_workers = 1;
    builder.work_dir = build_dir;
    builder.build_timeout_seconds = 300;
    std::optional<measure::LocalBuilderPool> pool;
    try {
      pool.emplace(builder);
    } catch (const std::filesystem::filesystem_error &e) {
      fail("-o '" + *out + "': cannot create the folder '" + build_dir.string() +
           "' the model is built in beside it (" + e.code().message() + "); choose a folder you can write");
    } catch (const std::exception &e) {
      fail(e.what());
    }
    options->build_artifact = isolated_builder(*pool);
    struct RemoveBuildDir {
      std::filesystem::path dir;
      ~RemoveBuildDir() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      }
    } remove_build_dir{build_dir};
    if (*threads > 0) executor::Model::set_threads(*threads);
    if (options->choose_in_model > 0 && options->db_path.empty())
      fail("--choose-in-model chooses among a database's programs: give it one with --db (kiln tune's)");
    auto chosen = [](const executor::InModelChoice &c) {
      if (c.chosen_rank == 0)
        std::fprintf(stderr, "step %zu (%s): kept the best of %zu programs tried inside the model (%.3f ms)\n", c.step,
                     c.workload.c_str(), c.tried + 1, c.window_ms);
      else
        std::fprintf(stderr,
                     "step %zu (%s): program %zu of the database's ranking runs its window in %.3f ms "
                     "instead of %.3f ms\n",
                     c.step, c.workload.c_str(), c.chosen_rank + 1, c.chosen_window_ms, c.window_ms);
    };
    executor::CompileReport report;
    try {
      // A counter redrawn in place on a terminal; elsewhere (a log) nothing per subgraph.
      bool tty = isatty(STDERR_FILENO);
      if (dynamic) {
        const executor::DynamicManifest &m = plan->manifest;
        std::fprintf(stderr, "%zu buckets:", m.buckets.size());
        for (size_t i = 0; i < m.buckets.size(); ++i) std::fprintf(stderr, " %s", m.bucket_folder(i).c_str());
        std::fprintf(stderr, "\n");
        report = executor::compile_dynamic_model(
            m, [&](size_t i) { return prepare_bucket(*args, *plan, i); }, *options, *out,
            [&](size_t i, const executor::CompileReport &r) {
              std::fprintf(stderr, "bucket %zu/%zu (%s): %zu subgraphs, %zu tuned, %.1f s\n", i + 1, m.buckets.size(),
                           m.bucket_folder(i).c_str(), r.subgraphs, r.tuned, r.seconds);
            });
      } else
        report = executor::compile_model(
            model, *options, *out,
            [tty](size_t done, size_t total) {
              if (!tty) return;
              std::fprintf(stderr, "\rcompiling subgraph %zu/%zu", done, total);
              if (done == total) std::fprintf(stderr, "\n");
            },
            chosen);
    } catch (const CLI::Error &) {
      throw;  // a bucket's preparation failed and said why
    } catch (const std::exception &e) {
      fail(e.what());
    }
    for (const std::string &warning : report.warnings) std::fprintf(stderr, "warning: %s\n", warning.c_str());
    std::printf("compiled %zu subgraphs into %s in %.1f s: %zu with tuned schedules, %zu untuned", report.subgraphs,
                out->c_str(), report.seconds, report.tuned, report.untuned);
    if (report.views > 0)
      std::printf(", %zu reshape%s run as views of %s input", report.views, report.views == 1 ? "" : "s",
                  report.views == 1 ? "its" : "their");
    if (report.unusable_records > 0)
      std::printf(" (%zu unusable database record%s passed over)", report.unusable_records,
                  report.unusable_records == 1 ? "" : "s");
    std::printf("\n");
    if (default_db_missing)
      std::fprintf(stderr,
                   "note: no %s here, so every subgraph is untuned: tune first (kiln tune --model %s) or give the "
                   "database with --db FILE\n",
                   kDefaultDatabase, args->model.c_str());
    const std::string resolved_target =
        report.untuned_with_records_for.empty() ? "" : Target::parse(options->target).str();
    for (const auto &[other, count] : report.untuned_with_records_for)
      std::fprintf(stderr,
                   "note: %s holds records for %zu of the untuned subgraphs under target '%s', not '%s': if the "
                   "model was tuned for that target, compile with --target '%s'\n",
                   options->db_path.c_str(), count, other.c_str(), resolved_target.c_str(), other.c_str());
    for (const std::string &flags : report.tuned_with_other_options)
      std::fprintf(stderr,
                   "note: %s also holds records tuned for this target with other pipeline options (%s): if this "
                   "model was tuned that way, compile it with the same options to use them\n",
                   options->db_path.c_str(), flags.empty() ? "the defaults" : flags.c_str());
    std::printf("activation memory: %.2f MB planned (%.2f MB with a buffer per tensor)%s\n", report.arena_bytes / 1e6,
                report.unplanned_bytes / 1e6, dynamic ? " in the largest bucket" : "");
    if (dynamic) {
      std::printf("dynamic dimensions:");
      for (const executor::DynamicDim &d : plan->manifest.dims)
        std::printf(" %s=%lld..%lld", d.name.c_str(), (long long)d.min, (long long)d.max);
      std::printf("; buckets:");
      for (size_t i = 0; i < plan->manifest.buckets.size(); ++i)
        std::printf(" %s", plan->manifest.bucket_folder(i).c_str());
      std::printf("\n");
    }
    if (options->choose_in_model > 0) {
      size_t changed = 0;
      for (const executor::InModelChoice &c : report.in_model) changed += c.chosen_rank != 0;
      std::printf("inside the model: %zu of %zu steps with other programs took one of them\n", changed,
                  report.in_model.size());
    }
  });
}

}  // namespace kiln::cli
