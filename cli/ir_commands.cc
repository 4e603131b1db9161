#include "cli/ir_commands.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>

#include "cli/common_flags.h"
#include "cli/workload_args.h"
#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "ir/gpu_lower.h"
#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "ir/schedule/schedule.h"
#include "ops/registry.h"
#include "search/space.h"
#include "support/file_read.h"
#include "support/json_read.h"
#include "te/te.h"

namespace kiln::cli {

static void add_ops(CLI::App &app) {
  auto *cmd = app.add_subcommand("ops", "List the operator library with inputs and attributes");
  auto verbose = std::make_shared<bool>(false);
  cmd->add_flag("-v,--verbose", *verbose, "print each operator's full description and default attributes");
  cmd->callback([verbose] {
    for (const ops::OpDef &op : ops::all_ops()) {
      std::string inputs = std::to_string(op.min_inputs);
      if (op.max_inputs < 0) {
        inputs += "+";
      } else if (op.max_inputs != op.min_inputs) {
        inputs += "-" + std::to_string(op.max_inputs);
      }
      if (*verbose) {
        std::cout << op.name << " (" << inputs << " inputs)\n  " << op.summary
                  << "\n  defaults: " << op.default_attrs.dump() << "\n\n";
      } else {
        // The first sentence: up to a period that ends a word ("0.5 * x" is not one).
        std::string first = op.summary.substr(0, op.summary.find(". "));
        if (!first.empty() && first.back() == '.') first.pop_back();
        std::cout << op.name << std::string(op.name.size() < 20 ? 20 - op.name.size() : 1, ' ') << inputs
                  << (inputs.size() < 4 ? std::string(4 - inputs.size(), ' ') : " ") << first << "\n";
      }
    }
  });
}

static ir::PrimFunc lower_or_fail(const WorkloadArgs &args, ops::Workload *out = nullptr) {
  try {
    ops::Workload w = args.build();
    if (out) *out = w;
    return w.lower();
  } catch (const std::exception &e) {
    fail(e.what());
  }
}

static void add_show(CLI::App &app) {
  auto *cmd = app.add_subcommand("show", "Print a task's loop program (unscheduled, or after a trace)");
  auto args = std::make_shared<WorkloadArgs>();
  args->add_to(*cmd);
  auto trace_file = std::make_shared<std::string>();
  auto key = std::make_shared<bool>(false);
  cmd->add_option("--trace", *trace_file, "apply this trace JSON file before printing");
  cmd->add_flag("--key", *key, "also print the workload key (canonical JSON and SHA-256)");
  auto untuned = std::make_shared<bool>(false);
  cmd->add_flag("--untuned", *untuned,
                "apply the schedule the task runs before it is tuned (what kiln compile uses for a task without a "
                "record), for --target")
      ->excludes(cmd->get_option("--trace"));
  auto emit = std::make_shared<std::string>();
  auto target = std::make_shared<std::string>("llvm -mcpu=native");
  cmd->add_option("--emit", *emit,
                  "print what code generation makes of it instead: lowered (the loop program code generation sees), "
                  "llvm (LLVM IR after optimization) or asm; for a cuda target: gpu (the kernels: launch shapes, "
                  "barriers, shared buffers), ptx, or cuda-artifact (the NAME.cuda.json kiln-cuda-measure runs)")
      ->check(CLI::IsMember({"lowered", "llvm", "asm", "gpu", "ptx", "cuda-artifact"}));
  add_target_option(*cmd, *target, "the target for --emit and --untuned");
  cmd->callback([args, trace_file, key, untuned, emit, target] {
    ops::Workload w;
    ir::PrimFunc f = lower_or_fail(*args, &w);
    if (*key) std::cout << "workload: " << w.canonical_string() << "\nkey: " << w.key_hash() << "\n\n";
    if (!trace_file->empty()) {
      nlohmann::json trace_json;
      try {
        trace_json = kiln::support::read_json_file(*trace_file, "trace file");
      } catch (const std::exception &e) {
        fail(e.what());
      }
      try {
        ir::Trace t = ir::Trace::from_json(trace_json);
        f = ir::Schedule::replay(f, t).func();
      } catch (const std::exception &e) {
        fail("trace '" + *trace_file + "' does not apply: " + e.what());
      }
    }
    if (*untuned) {
      try {
        if (std::optional<ir::Trace> t = search::untuned_trace(f, Target::parse(*target))) {
          f = ir::Schedule::replay(f, *t).func();
          std::cout << "trace: " << t->to_json().dump() << "\n\n";
        }
      } catch (const std::invalid_argument &e) {
        fail(e.what());
      }
    }
    try {
      if (*emit == "lowered") {
        ir::LayoutRewrite lowered = ir::lower_with_prepack(f);
        std::cout << ir::to_string(lowered.kernel);
        if (lowered.prepack) std::cout << "\n" << ir::to_string(*lowered.prepack);
      } else if (*emit == "gpu" || *emit == "ptx" || *emit == "cuda-artifact") {
        Target t = Target::parse(*target);
        if (t.backend().kind() != BackendKind::kCuda)
          fail("--emit " + *emit + " needs a cuda target (--target 'cuda -arch=sm_90'), not " + t.str());
        if (*emit == "gpu") {
          std::cout << ir::to_string(ir::lower_for_gpu(f, codegen::gpu_limits(t)));
        } else {
          codegen::Compiler compiler;
          codegen::CudaModule m = compiler.build_cuda(f, t);
          std::cout << (*emit == "ptx" ? m.ptx : m.artifact_text() + "\n");
        }
      } else if (*emit == "llvm" || *emit == "asm") {
        codegen::Compiler compiler;
        Target t = Target::parse(*target);
        std::cout << (*emit == "llvm" ? compiler.emit_llvm_ir(f, t) : compiler.emit_assembly(f, t));
      } else {
        std::cout << ir::to_string(f);
      }
    } catch (const std::exception &e) {
      fail(std::string("code generation failed: ") + e.what());
    }
  });
}

// A fixed multi-level tiling of the last block (the kind of schedule the search
// generates), checked against the unscheduled program by the interpreter.
static void add_demo(CLI::App &app) {
  auto *cmd =
      app.add_subcommand("demo", "Schedule an operator with a sampled tiling and check it against the reference");
  auto args = std::make_shared<WorkloadArgs>();
  args->add_to(*cmd);
  auto seed = std::make_shared<uint64_t>(1);
  cmd->add_option("--seed", *seed, "seed for the sampled tile sizes")->capture_default_str();
  cmd->callback([args, seed] {
    if (args->op.empty() && args->workload_file.empty()) {
      args->op = "dense";
      args->shapes = {"64x96", "48x96", "48"};
    }
    ir::PrimFunc f = lower_or_fail(*args);
    // The interpreter takes about a microsecond per element and statement: a shape of
    // billions would run for hours with no output.
    constexpr int64_t kMaxDemoElements = int64_t{1} << 24;
    int64_t elements = 0;
    for (const ir::Buffer &b : f.params) elements += b->num_elements();
    if (elements > kMaxDemoElements) {
      fail("demo checks its schedule with the IR interpreter, which is for small shapes (at most " +
           std::to_string(kMaxDemoElements) + " elements over all buffers; these have " + std::to_string(elements) +
           "): give smaller shapes, or check and time large ones with `kiln measure` or `kiln tune-op`");
    }
    ir::Schedule sch(f, *seed);
    std::vector<std::string> blocks = sch.block_names();
    // Inline element-wise producers where legal, then tile the main block.
    for (const std::string &b : blocks) sch.try_compute_inline(sch.get_block(b));
    std::string main_block;
    for (const std::string &b : sch.block_names()) {
      ir::Stmt s = ir::sched::find_block(sch.func(), b, "demo");
      for (const ir::IterVar &iv : s.as<ir::BlockNode>()->iter_vars)
        if (iv.kind == ir::IterKind::kReduce) main_block = b;
    }
    if (main_block.empty() && sch.block_names().empty()) {
      fail("the workload computes nothing (no operators, or every one inlined): there is nothing to schedule");
    }
    if (main_block.empty()) main_block = sch.block_names().back();
    ir::BlockRV block = sch.get_block(main_block);
    std::vector<ir::LoopRV> loops = sch.get_loops(block);
    if (loops.empty())
      fail("block '" + main_block + "' has no loops (its output is a scalar): there is nothing to tile");
    std::vector<ir::LoopRV> outer, inner;
    for (const ir::LoopRV &l : loops) {
      std::vector<ir::ExprRV> t = sch.sample_perfect_tile(l, 2, 8);
      std::vector<ir::LoopRV> parts = sch.split(l, {t[0], t[1]});
      outer.push_back(parts[0]);
      inner.push_back(parts[1]);
    }
    std::vector<ir::LoopRV> order = outer;
    order.insert(order.end(), inner.begin(), inner.end());
    sch.reorder(order);
    sch.try_parallel(outer[0]);
    if (!sch.try_vectorize(inner.back())) sch.unroll(inner.back());
    std::mt19937_64 rng(*seed);
    std::vector<ir::HostTensor> inputs;
    for (size_t i = 0; i + 1 < f.params.size(); ++i) {
      inputs.push_back(ir::HostTensor::like(f.params[i]));
      inputs.back().fill_random(rng);
    }
    std::vector<ir::HostTensor> want = ir::interpret(f, inputs), got = ir::interpret(sch.func(), inputs);
    double err = ir::relative_l2_error(got[0], want[0]);
    std::cout << ir::to_string(sch.func()) << "\ntrace: " << sch.trace().to_json().dump() << "\n\n"
              << "check against the unscheduled program: relative L2 error " << err
              << (err <= 1e-5 ? " (ok)\n" : " (MISMATCH)\n");
    if (err > 1e-5) throw CLI::RuntimeError(1);
  });
}

void add_ir_commands(CLI::App &app) {
  add_ops(app);
  add_show(app);
  add_demo(app);
}

}  // namespace kiln::cli
