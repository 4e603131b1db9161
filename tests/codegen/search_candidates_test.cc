// The programs the tuner actually generates (sampled sketches after postprocessing:
// register accumulators, packed panels, vectorized epilogues, auto-unroll pragmas) run
// on x86-64 and equal the interpreter: for the host, and for each x86 family the host
// can run (an AVX-512 target's code on an AVX-512 host, AVX2 code on any AVX2 host).
//
// Change the number of samples per sketch of the per-family test:
//   KILN_ISA_SAMPLES=<n> (default 6)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"
#include "ir/interpreter.h"
#include "ops/examples.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::codegen {
namespace {

using ir::HostTensor;

// Builds every sketch of `w` for `target` with `samples_per_sketch` sampled decisions
// each, runs the artifacts in this process and compares them with the interpreter.
void check_sampled_candidates(const ops::NamedWorkload &w, const Target &target, uint64_t samples_per_sketch) {
  te::ComputeDAG dag = w.workload.build_dag();
  ir::PrimFunc func = te::lower(dag, w.name);
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
    for (uint64_t seed = 0; seed < samples_per_sketch; ++seed) {
      std::optional<search::Candidate> c = search::realize(func, sketches[s], post, seed);
      if (!c) continue;
      std::string context = "\ntarget: " + target.str() + "\ntrace: " + c->trace.to_json().dump();
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
      ASSERT_EQ(entry(args.data()), 0) << context;
      dlclose(h);
      std::filesystem::remove(path);
      for (size_t o = 0; o < want.size(); ++o) {
        const HostTensor &got = all[inputs.size() + o];
        if (ir::is_float(got.dtype())) {
          ASSERT_LE(ir::relative_l2_error(got, want[o]), 1e-5) << context;
        } else {
          ASSERT_TRUE(ir::exactly_equal(got, want[o])) << context;
        }
      }
    }
  }
  EXPECT_GT(built, 0);
  std::filesystem::remove_all(dir);
}

class CodegenSearchCandidates : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(CodegenSearchCandidates, RealizedSketchesMatchInterpreter) {
  check_sampled_candidates(GetParam(), Target::parse("llvm -mcpu=native -num-cores=2"), 2);
}

INSTANTIATE_TEST_SUITE_P(Examples, CodegenSearchCandidates, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

// An x86 family: the target its code is built for and whether this host can run it.
struct X86Family {
  std::string name;
  std::string target;
  bool host_runs_it;
};

std::vector<X86Family> x86_families() {
  return {
      {"avx2", "llvm -mcpu=haswell -mtriple=x86_64-linux-gnu -num-cores=2",
       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2")},
      {"avx512", "llvm -mcpu=skylake-avx512 -mtriple=x86_64-linux-gnu -num-cores=2",
       __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd")}};
}

// Workloads large enough for register tiles, packed panels and LLVM's own vectorizer
// to take part (tiny ones are unrolled away), with extents that are and are not
// multiples of the vector width.
std::vector<ops::NamedWorkload> register_tile_workloads() {
  auto f32 = [](std::vector<int64_t> shape) { return ir::TensorType{std::move(shape), ir::DType::kFloat32}; };
  std::vector<ops::NamedWorkload> out;
  out.push_back({"conv3x3_bias", ops::Workload::single("conv2d", {f32({1, 16, 14, 14}), f32({32, 16, 3, 3}), f32({32})},
                                                       {{"pads", {1, 1, 1, 1}}})});
  out.push_back(
      {"conv3x3_64ch_bias",
       ops::Workload::single("conv2d", {f32({1, 8, 8, 8}), f32({64, 8, 3, 3}), f32({64})}, {{"pads", {1, 1, 1, 1}}})});
  out.push_back({"conv3x3_s2", ops::Workload::single("conv2d", {f32({1, 8, 15, 15}), f32({16, 8, 3, 3})},
                                                     {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}})});
  out.push_back({"depthwise", ops::Workload::single("conv2d", {f32({1, 32, 14, 14}), f32({32, 1, 3, 3})},
                                                    {{"groups", 32}, {"pads", {1, 1, 1, 1}}})});
  out.push_back({"dense_bias", ops::Workload::single("dense", {f32({32, 64}), f32({48, 64}), f32({48})})});
  out.push_back({"matmul_primes", ops::Workload::single("matmul", {f32({17, 31}), f32({31, 23})})});
  // Rows and output features without good factors: padded tiles (sample_tile), whose
  // full tiles are versioned apart and whose partial vector tiles are masked.
  out.push_back(
      {"dense_prime_rows_and_features", ops::Workload::single("dense", {f32({37, 48}), f32({67, 48}), f32({67})})});
  // One row: a sketch vectorizes along the reduction (rfactor by the lanes).
  out.push_back({"gemv_bias", ops::Workload::single("dense", {f32({1, 256}), f32({67, 256}), f32({67})})});
  // Token ids: an embedding lookup (rows gathered at run-time indices, vectorized along
  // the hidden axis) and an int64 mask cast to float.
  auto i64 = [](std::vector<int64_t> shape) { return ir::TensorType{std::move(shape), ir::DType::kInt64}; };
  out.push_back({"embedding_take", ops::Workload::single("take", {f32({50, 72}), i64({1, 12})})});
  out.push_back({"mask_cast", ops::Workload::single("cast", {i64({4, 67})}, {{"dtype", "float32"}})});
  return out;
}

using FamilyCase = std::tuple<X86Family, ops::NamedWorkload>;
class CodegenSampledSchedulesPerIsa : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(CodegenSampledSchedulesPerIsa, MatchInterpreter) {
  const auto &[family, workload] = GetParam();
  if (!family.host_runs_it) GTEST_SKIP() << "this host cannot run " << family.name << " code (" << family.target << ")";
  const char *env = std::getenv("KILN_ISA_SAMPLES");
  check_sampled_candidates(workload, Target::parse(family.target), env ? std::strtoull(env, nullptr, 10) : 6);
}

INSTANTIATE_TEST_SUITE_P(Families, CodegenSampledSchedulesPerIsa,
                         ::testing::Combine(::testing::ValuesIn(x86_families()),
                                            ::testing::ValuesIn(register_tile_workloads())),
                         [](const ::testing::TestParamInfo<FamilyCase> &info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
                         });

}  // namespace
}  // namespace kiln::codegen
