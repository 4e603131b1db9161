// Writes the GPU programs the GPU check measures (scripts/gpu-check): the hand-scheduled
// ones, and programs of the GPU search space sampled as a tuner's first rounds are
// (random, passed by the postprocessors: how good the space is before a cost model has
// GPU timings to learn from), each as a CUDA artifact (NAME.cuda.json) for one arch, and
// cases.json saying what each computes (and, for a sampled one, its trace), so
// bench/gpu_vs_torch.py can check its outputs against PyTorch (cuBLAS, cuDNN) and time
// both in the same run.
//
//   kiln_bench_gpu_programs --out DIR [--arch sm_90] [--sampled N]   (N per workload, 8)
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "search/space.h"
#include "te/te.h"
#include "tests/common/gpu_schedules.h"

namespace {

using namespace kiln;  // NOLINT: a small program
using ir::DType;
using ops::Workload;

struct Case {
  std::string name;
  std::string reference;  // what gpu_vs_torch.py computes: matmul, conv2d, softmax, layer_norm
  Workload workload;
  std::function<void(ir::Schedule &)> schedule;
  double flops;
};

// A workload whose search-space programs are sampled.
struct Sampled {
  std::string name;
  std::string reference;
  Workload workload;
  double flops;
};

// Up to `n` distinct programs of the default GPU space for `f`, drawn from every sketch
// in turn (seeds 0, 1, ...), each passed by the postprocessors (verify_gpu).
std::vector<search::Candidate> sample_programs(const ir::PrimFunc &f, const Target &target, int n) {
  search::SearchSpace space = search::default_search_space(target);
  std::vector<ir::Trace> sketches = search::generate_sketches(f, space.rules, 0);
  std::vector<search::Candidate> out;
  std::set<std::string> seen;
  for (uint64_t seed = 0; static_cast<int>(out.size()) < n && seed < static_cast<uint64_t>(n) * 8; ++seed) {
    const ir::Trace &sketch = sketches[seed % sketches.size()];
    std::optional<search::Candidate> c = search::realize(f, sketch, space.postprocessors, seed);
    if (c && seen.insert(c->trace.to_json().dump()).second) out.push_back(std::move(*c));
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  std::string out, arch = "sm_90";
  int sampled_per_workload = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--arch" && i + 1 < argc) {
      arch = argv[++i];
    } else if (a == "--sampled" && i + 1 < argc) {
      sampled_per_workload = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: kiln_bench_gpu_programs --out DIR [--arch sm_90] [--sampled N]\n";
      return 2;
    }
  }
  if (out.empty()) {
    std::cerr << "kiln_bench_gpu_programs: --out DIR is required\n";
    return 2;
  }
  auto matmul = [](int64_t n) {
    return Workload::single("matmul", {{{n, n}, DType::kFloat32}, {{n, n}, DType::kFloat32}});
  };
  test_support::GemmTiles small{64, 64, 8, 4, 4, 2};
  test_support::GemmTiles large{128, 128, 8, 8, 8, 4};
  std::vector<Case> cases = {
      {"gemm_1024", "matmul", matmul(1024),
       [&](ir::Schedule &s) { test_support::schedule_gemm_shared_tiles(s, "matmul", small); },
       2.0 * 1024 * 1024 * 1024},
      {"gemm_1024_large_tiles", "matmul", matmul(1024),
       [&](ir::Schedule &s) { test_support::schedule_gemm_shared_tiles(s, "matmul", large); },
       2.0 * 1024 * 1024 * 1024},
      {"gemm_4096", "matmul", matmul(4096),
       [&](ir::Schedule &s) { test_support::schedule_gemm_shared_tiles(s, "matmul", large); },
       2.0 * 4096 * 4096 * 4096},
      {"conv2d_64_64_3x3_56", "conv2d",
       Workload::single("conv2d", {{{1, 64, 56, 56}, DType::kFloat32}, {{64, 64, 3, 3}, DType::kFloat32}},
                        {{"pads", {1, 1, 1, 1}}}),
       [](ir::Schedule &s) { test_support::schedule_conv2d_shared_tiles(s, test_support::ConvTiles{}); },
       2.0 * 64 * 56 * 56 * 64 * 9},
      {"softmax_4096x1024", "softmax", Workload::single("softmax", {{{4096, 1024}, DType::kFloat32}}),
       [](ir::Schedule &s) { test_support::schedule_softmax_rows(s, 256); }, 0},
  };
  const std::vector<Sampled> sampled = {
      {"gemm_1024", "matmul", matmul(1024), 2.0 * 1024 * 1024 * 1024},
      {"conv2d_64_64_3x3_56", "conv2d", cases[3].workload, cases[3].flops},
      {"softmax_4096x1024", "softmax", cases[4].workload, 0},
      {"softmax_32x1000", "softmax", Workload::single("softmax", {{{32, 1000}, DType::kFloat32}}), 0},
      {"layer_norm_128x768", "layer_norm",
       Workload::single("layer_norm",
                        {{{128, 768}, DType::kFloat32}, {{768}, DType::kFloat32}, {{768}, DType::kFloat32}},
                        {{"axis", -1}, {"epsilon", 1e-5}}),
       0},
  };
  std::filesystem::create_directories(out);
  codegen::Compiler compiler;
  Target target = Target::parse("cuda -arch=" + arch);
  std::string ptxas = codegen::find_ptxas();
  nlohmann::json index = nlohmann::json::array();
  // Each sampled program is a case of its own, its trace and its workload's name beside it.
  std::vector<std::pair<ir::PrimFunc, nlohmann::json>> programs;
  for (Case &c : cases) {
    ir::PrimFunc f = te::lower(c.workload.build_dag(), c.name);
    ir::Schedule sch(f);
    c.schedule(sch);
    programs.emplace_back(
        sch.func(),
        nlohmann::json{
            {"name", c.name}, {"reference", c.reference}, {"workload", c.workload.to_json()}, {"flops", c.flops}});
  }
  for (const Sampled &w : sampled) {
    ir::PrimFunc f = te::lower(w.workload.build_dag(), w.name);
    std::vector<search::Candidate> drawn = sample_programs(f, target, sampled_per_workload);
    for (size_t k = 0; k < drawn.size(); ++k)
      programs.emplace_back(drawn[k].func, nlohmann::json{{"name", w.name + ".sampled" + std::to_string(k)},
                                                          {"sampled_from", w.name},
                                                          {"trace", drawn[k].trace.to_json()},
                                                          {"reference", w.reference},
                                                          {"workload", w.workload.to_json()},
                                                          {"flops", w.flops}});
  }
  for (auto &[func, entry] : programs) {
    const std::string name = entry["name"].get<std::string>();
    codegen::CudaModule m = compiler.build_cuda(func, target);
    codegen::PtxasResult assembled;
    if (!ptxas.empty()) {
      assembled = codegen::run_ptxas(m.ptx, arch, ptxas);
      m.cubin = assembled.cubin;
      m.cubin_toolkit = assembled.toolkit;
    }
    std::string path = out + "/" + name + ".cuda.json";
    std::ofstream(path) << m.artifact_text();
    entry["artifact"] = name + ".cuda.json";
    entry["launches"] = m.manifest()["launches"];
    if (!ptxas.empty()) {
      for (const codegen::PtxasKernelReport &k : assembled.kernels)
        entry["ptxas"].push_back({{"kernel", k.name},
                                  {"registers", k.registers},
                                  {"spill_store_bytes", k.spill_store_bytes},
                                  {"spill_load_bytes", k.spill_load_bytes}});
    }
    index.push_back(entry);
    std::cout << name << ": " << path << "\n";
  }
  std::ofstream(out + "/cases.json") << index.dump(2) << "\n";
  return 0;
}
