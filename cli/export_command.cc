#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/common_flags.h"
#include "cli/model_commands.h"
#include "cli/workload_args.h"
#include "executor/export.h"

namespace kiln::cli {

void add_export_command(CLI::App &app) {
  struct ExportArgs {
    executor::ExportRequest request{kDefaultDatabase, "", "llvm -mcpu=native", ""};
    std::string object, header;
  };
  auto a = std::make_shared<ExportArgs>();
  auto *cmd = app.add_subcommand("export",
                                 "Build a workload's best record into an object file and a C header, for another "
                                 "program or compiler to link (kiln_export.h does the same from C)");
  cmd->add_option("--db", a->request.db_path, "the tuning database")->capture_default_str();
  cmd->add_option("--workload", a->request.workload,
                  "the workload: its key hash (kiln show --key, kiln import --json) or its JSON")
      ->required();
  add_target_option(*cmd, a->request.target,
                    "the CPU to build for; a record of another CPU of the same kind serves when it has none");
  cmd->add_option("--name", a->request.symbol,
                  "the kernel's C name (default: kiln_ and its operators, e.g. kiln_dense_bias_relu); its helpers "
                  "are NAME_prepack, NAME_run and NAME_info");
  cmd->add_option("-o,--output", a->object, "the object file to write, e.g. kernel.o")->required();
  cmd->add_option("--header", a->header, "the C header to write (default: the object's name with .h)");
  cmd->callback([a] {
    std::string header = a->header;
    if (header.empty()) header = std::filesystem::path(a->object).replace_extension(".h").string();
    if (header == a->object) fail("the header would overwrite the object: give --header another name");
    executor::ExportedKernel kernel;
    try {
      kernel = executor::export_kernel(a->request);
      executor::write_exported_kernel(kernel, a->object, header);
    } catch (const executor::ExportNotFound &e) {
      std::fprintf(stderr, "kiln: error: %s\n", e.what());
      throw CLI::RuntimeError(2);
    } catch (const executor::ExportError &e) {
      fail(e.what());
    }
    const std::string prepack =
        kernel.has_prepack ? "; its weights are packed ahead of time by " + kernel.symbol + "_prepack" : "";
    std::printf("exported %s (%s, record %lld, tuned %.4g ms on %s%s) to %s and %s%s\n", kernel.symbol.c_str(),
                kernel.summary.c_str(), (long long)kernel.record_id, kernel.latency_seconds * 1e3,
                kernel.target.c_str(), kernel.exact_target ? "" : ", another CPU of the same kind", a->object.c_str(),
                header.c_str(), prepack.c_str());
  });
}

}  // namespace kiln::cli
