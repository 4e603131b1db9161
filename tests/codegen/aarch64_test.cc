// AArch64 artifacts are cross-emitted and linked here, then run under qemu-aarch64 by
// the cross-built kiln-run-artifacts, and must match the interpreter, for every example
// workload unscheduled and under random legal schedules (the same seeds as the x86 test).
//
// Change the count: KILN_AARCH64_TRACES=<n> (default 50 per workload)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/codegen.h"
#include "ir/interpreter.h"
#include "ir/schedule/schedule.h"
#include "ops/examples.h"
#include "te/te.h"
#include "tests/common/random_schedule.h"

namespace kiln::codegen {
namespace {

using ir::HostTensor;
namespace fs = std::filesystem;

int traces_per_workload() {
  const char *env = std::getenv("KILN_AARCH64_TRACES");
  return env ? std::atoi(env) : 50;
}

struct Case {
  uint64_t seed;
  ir::PrimFunc func;
  std::vector<HostTensor> want;
  std::string artifact, input_file, output_file;
  std::string trace;
};

class CodegenAArch64 : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(CodegenAArch64, CrossBuiltArtifactsMatchInterpreterUnderQemu) {
  const ops::NamedWorkload &w = GetParam();
  Target target = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78 -num-cores=2");
  fs::path dir = fs::temp_directory_path() / ("kiln_aarch64_" + std::to_string(getpid()) + "_" + w.name);
  fs::create_directories(dir);
  static Compiler compiler;

  te::ComputeDAG dag = w.workload.build_dag();
  ir::PrimFunc base = te::lower(dag, w.name);
  std::vector<Case> cases;
  std::hash<std::string> h;
  std::ofstream manifest(dir / "manifest");
  for (int i = -1; i < traces_per_workload(); ++i) {
    Case c;
    c.seed = i < 0 ? 0 : (h(w.name) % 100000) * 1000 + 500 + static_cast<uint64_t>(i);
    std::mt19937_64 rng(c.seed);
    std::vector<HostTensor> inputs;
    for (const te::Tensor &t : dag.inputs) {
      inputs.emplace_back(t.dtype(), t.shape());
      inputs.back().fill_random(rng, ir::is_float(t.dtype()) ? 0.1 : -3, 2.0);
    }
    ir::Schedule sch(base, c.seed);
    if (i >= 0) {
      int steps = 4 + static_cast<int>(rng() % 10);
      for (int s = 0; s < steps; ++s) {
        try {
          test_support::random_step(sch, rng);
        } catch (const ir::ScheduleError &) {
        }
      }
    }
    c.func = sch.func();
    c.trace = sch.trace().to_json().dump();
    c.want = ir::interpret(c.func, inputs);
    std::string stem = (dir / ("c" + std::to_string(cases.size()))).string();
    c.artifact = stem + ".so";
    c.input_file = stem + ".in";
    c.output_file = stem + ".out";
    try {
      compiler.build_artifact(c.func, target, c.artifact);
    } catch (const CodegenError &e) {
      if (std::string(e.what()).find("bound to") != std::string::npos) continue;  // GPU-only schedule
      FAIL() << "cross build failed: " << e.what() << "\ntrace: " << c.trace;
    }
    std::ofstream in(c.input_file, std::ios::binary);
    for (const HostTensor &t : inputs)
      in.write(static_cast<const char *>(t.data()), t.size() * ir::dtype_bytes(t.dtype()));
    manifest << c.artifact << " " << c.input_file << " " << c.output_file << " " << c.func.params.size() << " "
             << inputs.size();
    for (const ir::Buffer &p : c.func.params) manifest << " " << p->num_elements() * ir::dtype_bytes(p->dtype);
    manifest << "\n";
    cases.push_back(std::move(c));
  }
  manifest.close();
  std::string cmd = std::string(KILN_QEMU_AARCH64) +
                    " -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib " +
                    KILN_RUN_ARTIFACTS_AARCH64 + " " + (dir / "manifest").string() + " 2>" + (dir / "stderr").string();
  int rc = std::system(cmd.c_str());
  std::ifstream err_in(dir / "stderr");
  std::string err((std::istreambuf_iterator<char>(err_in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(rc, 0) << "qemu-aarch64 run failed: " << err;
  for (const Case &c : cases) {
    std::ifstream out(c.output_file, std::ios::binary);
    for (size_t o = 0; o < c.want.size(); ++o) {
      HostTensor got(c.want[o].dtype(), c.want[o].shape());
      out.read(static_cast<char *>(got.data()), got.size() * ir::dtype_bytes(got.dtype()));
      ASSERT_TRUE(out) << "missing output for seed " << c.seed;
      if (ir::is_float(got.dtype())) {
        double e = ir::relative_l2_error(got, c.want[o]);
        ASSERT_LE(e, 1e-5) << "seed " << c.seed << " output " << o << "\ntrace: " << c.trace;
      } else {
        ASSERT_TRUE(ir::exactly_equal(got, c.want[o])) << "seed " << c.seed << "\ntrace: " << c.trace;
      }
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Examples, CodegenAArch64, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

}  // namespace
}  // namespace kiln::codegen
