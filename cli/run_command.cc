#include "cli/model_commands.h"
#include "cli/workload_args.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/compiled_model_files.h"
#include "frontend/graph.h"
#include "support/flag_checks.h"

namespace kiln::cli {

void add_run_command(CLI::App &app) {
  struct RunArgs {
    std::string model, input, output, compare;
    double tolerance = 1e-4;
  };
  auto args = std::make_shared<RunArgs>();
  auto *cmd = app.add_subcommand("run", "Run a compiled model once on an input file");
  cmd->add_option("--model", args->model, "compiled model folder (kiln compile)")->required();
  cmd->add_option("--input", args->input,
                  "the model's input: a .npy file (C order; float64 converts to float32) or raw little-endian "
                  "bytes in the input's shape")
      ->required();
  cmd->add_option("--output", args->output, "write the output there: .npy when the name ends in .npy, else raw");
  cmd->add_option("--compare", args->compare,
                  "reference output (.npy or raw): print the error, fail beyond --tolerance");
  cmd->add_option("--tolerance", args->tolerance, "largest relative L2 error --compare accepts")
      ->capture_default_str()
      ->check(finite_range(0, 1e6));
  cmd->callback([args] {
    executor::Model model = load_compiled_model(args->model);
    if (model.input_types().size() != 1)
      fail("kiln run feeds one input; this model has " + std::to_string(model.input_types().size()));
    ir::HostTensor input = read_tensor(args->input, model.input_types()[0]);
    auto start = std::chrono::steady_clock::now();
    std::vector<ir::HostTensor> outputs;
    try {
      outputs = model.run({input});
    } catch (const executor::ModelError &e) {
      fail(e.what());
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const ir::HostTensor &out = outputs.at(0);
    std::printf("output '%s': %s %s, %.3f ms\n", model.output_names()[0].c_str(),
                frontend::shape_string(out.shape()).c_str(), ir::dtype_name(out.dtype()), ms);
    if (!args->output.empty()) {
      try {
        executor::write_tensor_file(args->output, out);
      } catch (const executor::TensorFileError &e) {
        fail(e.what());
      }
    }
    if (!args->compare.empty()) {
      ir::HostTensor want = read_tensor(args->compare, {out.shape(), out.dtype()});
      double max_abs = 0;
      for (int64_t i = 0; i < out.size(); ++i) max_abs = std::max(max_abs, std::fabs(out.get(i) - want.get(i)));
      double rel = ir::relative_l2_error(out, want);
      std::printf("compare: max abs error %.3g, relative L2 error %.3g (tolerance %.3g)\n", max_abs, rel,
                  args->tolerance);
      if (!(rel <= args->tolerance)) fail("the output differs from '" + args->compare + "' beyond the tolerance");
    }
  });
}

}  // namespace kiln::cli
