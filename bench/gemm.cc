// fp32 GEMM 1024^3: a hand-written tiled Kiln schedule (the kind the sketch rules
// generate) compiled by Kiln, timed side by side with oneDNN's sgemm in the same
// process, alternating, at 1 and 2 threads. Also reports build time per candidate and
// the end-to-end measure time per candidate through the builder pool and local runner.
//
// Usage: kiln_bench_gemm [--size N] [--repeats R]
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"
#include "ir/host_tensor.h"
#include "ir/schedule/schedule.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "ops/workload.h"
#include "support/clock.h"
#include "te/te.h"

using namespace kiln;  // NOLINT: benchmark program

namespace {

struct Tiles {
  int64_t mr = 8, nr = 32, vec = 16, kc = 256;
};

// i -> (io, mr), j -> (jo, nr = unrolled x vector lanes); loop order jo, io, k, ir, jr.
// The mr x nr accumulator tile is a cache_write into a local buffer, written back after
// the k loop: after compaction it is a small constant-indexed array that LLVM keeps in
// registers. B's (K x nr) column panel is packed once per jo into a dense buffer that
// every row tile then streams with unit stride.
ir::PrimFunc schedule_gemm(const ir::PrimFunc &f, const Tiles &t, ir::Trace *trace) {
  ir::Schedule sch(f);
  ir::BlockRV c = sch.get_block("matmul");
  std::vector<ir::LoopRV> l = sch.get_loops(c);
  std::vector<ir::LoopRV> is = sch.split(l[0], {int64_t{-1}, t.mr});
  std::vector<ir::LoopRV> js = sch.split(l[1], {int64_t{-1}, t.nr / t.vec, t.vec});
  sch.reorder({js[0], is[0], l[2], is[1], js[1], js[2]});
  ir::BlockRV acc = sch.cache_write(c, 0, "local");
  sch.reverse_compute_at(acc, is[0]);
  std::vector<ir::LoopRV> al = sch.get_loops(acc);
  std::vector<ir::LoopRV> av = sch.split(al.back(), {int64_t{-1}, t.vec});
  sch.vectorize(av[1]);
  sch.unroll(av[0]);
  sch.unroll(al[al.size() - 2]);
  ir::BlockRV pack = sch.cache_read(c, 2, "local");
  sch.compute_at(pack, js[0]);
  std::vector<ir::LoopRV> pl = sch.get_loops(pack);
  std::vector<ir::LoopRV> pv = sch.split(pl.back(), {int64_t{-1}, t.vec});
  sch.vectorize(pv[1]);
  sch.unroll(is[1]);
  sch.unroll(js[1]);
  sch.vectorize(js[2]);
  sch.parallel(js[0]);
  if (trace) *trace = sch.trace();
  return sch.func();
}

struct Stats {
  double min = 1e30, median = 0;
};
Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return Stats{v.front(), v[v.size() / 2]};
}

}  // namespace

int main(int argc, char **argv) {
  int64_t n = 1024;
  int repeats = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--size")) n = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
  }
  // The runner forks its server before this process starts any threads.
  std::filesystem::path work = std::filesystem::temp_directory_path() / ("kiln_bench_gemm_" + std::to_string(getpid()));
  std::filesystem::create_directories(work);
  measure::LocalRunner runner;

  ops::Workload w = ops::Workload::single("matmul", {{{n, n}, ir::DType::kFloat32}, {{n, n}, ir::DType::kFloat32}});
  ir::PrimFunc naive = te::lower(w.build_dag(), "matmul");
  Target target = Target::parse("llvm -mcpu=native -num-cores=2");
  // Register tile by vector width: 8x32 (16 of 32 zmm) on AVX-512, 4x16 (8 of 16 ymm)
  // elsewhere.
  Tiles tiles = target.vector_width_bits >= 512 ? Tiles{8, 32, 16, 256} : Tiles{4, 16, 8, 256};
  if (const char *env = std::getenv("KILN_GEMM_TILES")) {
    std::sscanf(env, "%ld,%ld,%ld,%ld", &tiles.mr, &tiles.nr, &tiles.vec, &tiles.kc);
  }
  std::printf("target %s, register tile %ldx%ld (vector %ld), kc %ld\n", target.str().c_str(), (long)tiles.mr,
              (long)tiles.nr, (long)tiles.vec, (long)tiles.kc);
  ir::Trace trace;
  ir::PrimFunc tuned = schedule_gemm(naive, tiles, &trace);

  codegen::Compiler compiler;
  std::string so = (work / "gemm.so").string();
  double t0 = support::now_seconds();
  codegen::BuildStats bs = compiler.build_artifact(tuned, target, so);
  double build_s = support::now_seconds() - t0;
  void *h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto entry = reinterpret_cast<kiln_entry_fn>(dlsym(h, KILN_ENTRY_SYMBOL));

  std::mt19937_64 rng(1);
  ir::HostTensor a(ir::DType::kFloat32, {n, n}), b(ir::DType::kFloat32, {n, n}), c(ir::DType::kFloat32, {n, n}),
      ref(ir::DType::kFloat32, {n, n});
  a.fill_random(rng);
  b.fill_random(rng);
  void *args[] = {a.data(), b.data(), c.data()};
  auto *A = static_cast<const float *>(a.data());
  auto *B = static_cast<const float *>(b.data());
  auto *Cref = static_cast<float *>(ref.data());
  auto run_kiln = [&] { entry(args); };
  auto run_dnnl = [&] { dnnl_sgemm('N', 'N', n, n, n, 1.0f, A, n, B, n, 0.0f, Cref, n); };

  // Correctness against oneDNN before timing.
  run_kiln();
  run_dnnl();
  double err = ir::relative_l2_error(c, ref);
  std::printf("GEMM %lldx%lldx%lld fp32, Kiln vs oneDNN sgemm; relative L2 difference %.2e\n", (long long)n,
              (long long)n, (long long)n, err);
  if (err > 1e-4) {
    std::fprintf(stderr, "Kiln's result differs from oneDNN's\n");
    return 1;
  }
  double flops = 2.0 * n * n * n;
  std::printf("%-8s %14s %14s %14s %14s %8s\n", "threads", "kiln GF/s med", "kiln GF/s max", "dnnl GF/s med",
              "dnnl GF/s max", "ratio");
  for (int threads : {1, 2}) {
    kiln_rt_set_num_threads(threads);
    omp_set_num_threads(threads);
    std::vector<double> tk, td;
    for (int w = 0; w < 3; ++w) {
      run_kiln();
      run_dnnl();
    }
    for (int r = 0; r < repeats; ++r) {  // alternate so drift hits both alike
      double s = support::now_seconds();
      for (int i = 0; i < 3; ++i) run_kiln();
      tk.push_back((support::now_seconds() - s) / 3);
      s = support::now_seconds();
      for (int i = 0; i < 3; ++i) run_dnnl();
      td.push_back((support::now_seconds() - s) / 3);
    }
    Stats k = summarize(tk), d = summarize(td);
    std::printf("%-8d %14.1f %14.1f %14.1f %14.1f %8.2f\n", threads, flops / k.median / 1e9, flops / k.min / 1e9,
                flops / d.median / 1e9, flops / d.min / 1e9, d.median / k.median);
  }
  std::printf("\nbuild of this candidate: %.3f s (lower %.3f, optimize %.3f, emit %.3f, link %.3f)\n", build_s,
              bs.lower_seconds, bs.optimize_seconds, bs.emit_seconds, bs.link_seconds);

  // The tuner's per-trial cost: tile-size variants through the builder pool and runner.
  std::vector<Tiles> variants = {{8, 32, 16, 128}, {8, 32, 16, 256},  {4, 64, 16, 256}, {8, 16, 16, 256},
                                 {4, 32, 16, 512}, {16, 16, 16, 256}, {8, 64, 16, 128}, {2, 64, 16, 256}};
  measure::LocalBuilderPool pool(2, work, 60.0);
  std::vector<measure::BuildInput> inputs;
  for (const Tiles &t : variants) inputs.push_back(measure::BuildInput{schedule_gemm(naive, t, nullptr), target, "v"});
  inputs.push_back(measure::BuildInput{naive, target, "reference"});
  double b0 = support::now_seconds();
  std::vector<measure::BuildResult> built = pool.build(inputs);
  double batch_build = support::now_seconds() - b0;
  std::string reference = built.back().artifact_path;
  double sum_build = 0;
  std::vector<measure::RunInput> runs;
  for (size_t i = 0; i + 1 < built.size(); ++i) {
    sum_build += built[i].build_seconds;
    measure::RunInput in;
    in.artifact_path = built[i].artifact_path;
    in.reference_artifact_path = reference;
    runs.push_back(in);
  }
  double r0 = support::now_seconds();
  std::vector<measure::RunResult> results = runner.run(runs);
  double batch_run = support::now_seconds() - r0;
  int ok = 0;
  for (const measure::RunResult &r : results) ok += r.ok();
  std::printf(
      "tuner path, %zu candidates: build %.3f s/candidate (2 workers, %.2f s wall), "
      "measure %.3f s/candidate incl. correctness check (first one also runs the naive reference); "
      "%d ok\n",
      variants.size(), sum_build / variants.size(), batch_build, batch_run / variants.size(), ok);
  std::filesystem::remove_all(work);
  return 0;
}
