// The programs the tuner actually generates (sampled sketches after postprocessing:
// register accumulators, packed panels, vectorized epilogues, auto-unroll pragmas) run
// on x86-64 and equal the interpreter.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "codegen/abi.h"
#include "codegen/codegen.h"
#include "ir/interpreter.h"
#include "ir/ops/examples.h"
#include "ir/te.h"
#include "search/space.h"

namespace kiln::codegen {
namespace {

using ir::HostTensor;

class CodegenSearchCandidates : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(CodegenSearchCandidates, RealizedSketchesMatchInterpreter) {
  const ops::NamedWorkload &w = GetParam();
  te::ComputeDAG dag = w.workload.build_dag();
  ir::PrimFunc func = te::lower(dag, w.name);
  Target target = Target::parse("llvm -mcpu=native -num-cores=2");
  std::vector<ir::Trace> sketches = search::generate_sketches(func, search::default_rules(target), 1);
  auto post = search::default_postprocessors(target);
  std::mt19937_64 rng(3);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, ir::is_float(t.dtype()) ? 0.1 : -3, 2.0);
  }
  std::vector<HostTensor> want = ir::interpret(func, inputs);
  static Compiler compiler;
  std::string dir = (std::filesystem::temp_directory_path() / ("kiln_search_cg_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  int built = 0;
  for (size_t s = 0; s < sketches.size(); ++s) {
    for (uint64_t seed = 0; seed < 2; ++seed) {
      std::optional<search::Candidate> c = search::realize(func, sketches[s], post, seed);
      if (!c) continue;
      std::string path = dir + "/" + w.name + "_" + std::to_string(s) + "_" + std::to_string(seed) + ".so";
      compiler.build_artifact(c->func, target, path);
      ++built;
      void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      ASSERT_NE(h, nullptr) << dlerror();
      auto entry = reinterpret_cast<kiln_entry_fn>(dlsym(h, KILN_ENTRY_SYMBOL));
      std::vector<HostTensor> all(inputs.begin(), inputs.end());
      for (size_t i = inputs.size(); i < c->func.params.size(); ++i) all.push_back(HostTensor::like(c->func.params[i]));
      std::vector<void *> args;
      for (HostTensor &t : all) args.push_back(t.data());
      ASSERT_EQ(entry(args.data()), 0);
      dlclose(h);
      std::filesystem::remove(path);
      for (size_t o = 0; o < want.size(); ++o) {
        const HostTensor &got = all[inputs.size() + o];
        if (ir::is_float(got.dtype())) {
          ASSERT_LE(ir::relative_l2_error(got, want[o]), 1e-5) << "trace: " << c->trace.to_json().dump();
        } else {
          ASSERT_TRUE(ir::exactly_equal(got, want[o])) << "trace: " << c->trace.to_json().dump();
        }
      }
    }
  }
  EXPECT_GT(built, 0);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Examples, CodegenSearchCandidates, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

}  // namespace
}  // namespace kiln::codegen
