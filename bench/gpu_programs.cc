// Writes the hand-scheduled GPU programs the GPU check measures (scripts/gpu-check):
// each as a CUDA artifact (NAME.cuda.json) for one arch, and cases.json saying what each
// computes, so bench/gpu_vs_torch.py can check its outputs against PyTorch (cuBLAS,
// cuDNN) and time both in the same run.
//
//   kiln_bench_gpu_programs --out DIR [--arch sm_90]
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "te/te.h"
#include "tests/common/gpu_schedules.h"

namespace {

using namespace kiln;  // NOLINT: a small program
using ir::DType;
using ops::Workload;

struct Case {
  std::string name;
  std::string reference;  // what gpu_vs_torch.py computes: matmul, conv2d, softmax
  Workload workload;
  std::function<void(ir::Schedule &)> schedule;
  double flops;
};

}  // namespace

int main(int argc, char **argv) {
  std::string out, arch = "sm_90";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--arch" && i + 1 < argc) {
      arch = argv[++i];
    } else {
      std::cerr << "usage: kiln_bench_gpu_programs --out DIR [--arch sm_90]\n";
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
  std::filesystem::create_directories(out);
  codegen::Compiler compiler;
  Target target = Target::parse("cuda -arch=" + arch);
  std::string ptxas = codegen::find_ptxas();
  nlohmann::json index = nlohmann::json::array();
  for (Case &c : cases) {
    ir::PrimFunc f = te::lower(c.workload.build_dag(), c.name);
    ir::Schedule sch(f);
    c.schedule(sch);
    codegen::CudaModule m = compiler.build_cuda(sch.func(), target);
    codegen::PtxasResult assembled;
    if (!ptxas.empty()) {
      assembled = codegen::run_ptxas(m.ptx, arch, ptxas);
      m.cubin = assembled.cubin;
      m.cubin_toolkit = assembled.toolkit;
    }
    std::string path = out + "/" + c.name + ".cuda.json";
    std::ofstream(path) << m.artifact_text();
    nlohmann::json entry{{"name", c.name},           {"artifact", c.name + ".cuda.json"},
                         {"reference", c.reference}, {"workload", c.workload.to_json()},
                         {"flops", c.flops},         {"launches", m.manifest()["launches"]}};
    if (!ptxas.empty()) {
      for (const codegen::PtxasKernelReport &k : assembled.kernels)
        entry["ptxas"].push_back({{"kernel", k.name},
                                  {"registers", k.registers},
                                  {"spill_store_bytes", k.spill_store_bytes},
                                  {"spill_load_bytes", k.spill_load_bytes}});
    }
    index.push_back(entry);
    std::cout << c.name << ": " << path << "\n";
  }
  std::ofstream(out + "/cases.json") << index.dump(2) << "\n";
  return 0;
}
