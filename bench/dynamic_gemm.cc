// A dense layer with a dynamic row count M, compiled once for a range of M
// (`kiln compile --dim M=1..1024`), against oneDNN's sgemm at the same M, alternating in
// one process. The model is y = x · Wᵀ (x [M, K], W [N, K]: what
// `bench/export_models.py --dynamic gemm` writes); oneDNN computes the same product
// from the same data. Both sides with the same threads. Prints per M the medians, the
// ratio oneDNN / Kiln (above 1: Kiln is faster) and their geometric mean; Kiln's time
// includes copying the input into its bucket(s) and the output out (a dense layer's rows
// never meet, so a call runs as up to two buckets on its rows).
//
// Usage: kiln_bench_dynamic_gemm --compiled DIR --weight W.npy --m 3,17,... [--threads 2] [--rounds 5]
//                                [--repeat 50]
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "executor/dynamic_model.h"
#include "executor/tensor_file.h"

using namespace kiln;  // NOLINT: benchmark program

namespace {

template <typename Call>
double median_ms(int repeat, const Call &call) {
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"A dynamic-M dense layer compiled by Kiln against oneDNN's sgemm"};
  std::string compiled, weight_file, m_list;
  int threads = 2, rounds = 5, repeat = 50;
  app.add_option("--compiled", compiled, "the dynamic compiled model (kiln compile --dim M=MIN..MAX)")->required();
  app.add_option("--weight", weight_file, "the model's weight W [N, K] as .npy, for oneDNN")->required();
  app.add_option("--m", m_list, "comma-separated M values to time")->required();
  app.add_option("--threads", threads, "threads of both sides")->capture_default_str();
  app.add_option("--rounds", rounds, "alternating blocks per M (the median is reported)")->capture_default_str();
  app.add_option("--repeat", repeat, "timed calls per block")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  executor::DynamicModel model = executor::DynamicModel::load(compiled);
  executor::Model::set_threads(threads);
  omp_set_num_threads(threads);
  // A weight matrix of up to 2^28 elements (1 GiB of float32).
  ir::HostTensor weight = executor::read_npy_file(weight_file, ir::DType::kFloat32, int64_t{1} << 28);
  const int64_t n = weight.shape().at(0), k = weight.shape().at(1);
  std::vector<int64_t> ms;
  std::stringstream ss(m_list);
  for (std::string part; std::getline(ss, part, ',');) ms.push_back(std::stoll(part));

  std::printf("%6s %10s %10s %10s %10s %10s\n", "M", "buckets", "kiln ms", "onednn ms", "onednn/kiln", "max err");
  double log_sum = 0;
  for (int64_t m : ms) {
    std::vector<ir::HostTensor> inputs = model.random_inputs({m}, 1);
    const ir::HostTensor &x = inputs.at(0);
    if (x.shape() != std::vector<int64_t>{m, k}) {
      std::fprintf(stderr, "the model's input is not [M, %lld]\n", (long long)k);
      return 1;
    }
    std::vector<float> c(static_cast<size_t>(m * n));
    auto run_dnnl = [&] {
      dnnl_sgemm('N', 'T', m, n, k, 1.0f, static_cast<const float *>(x.data()), k,
                 static_cast<const float *>(weight.data()), k, 0.0f, c.data(), n);
    };
    std::vector<ir::HostTensor> out;
    auto run_kiln = [&] { out = model.run(inputs); };
    run_dnnl();
    run_kiln();
    double err = 0;
    for (int64_t i = 0; i < m * n; ++i)
      err = std::max(err, std::fabs(static_cast<double>(static_cast<const float *>(out.at(0).data())[i]) - c[i]));
    std::vector<double> kiln_ms, dnnl_ms;
    for (int r = 0; r < rounds; ++r) {
      kiln_ms.push_back(median_ms(repeat, run_kiln));
      dnnl_ms.push_back(median_ms(repeat, run_dnnl));
    }
    std::sort(kiln_ms.begin(), kiln_ms.end());
    std::sort(dnnl_ms.begin(), dnnl_ms.end());
    const double kt = kiln_ms[kiln_ms.size() / 2], dt = dnnl_ms[dnnl_ms.size() / 2];
    log_sum += std::log(dt / kt);
    std::string buckets;
    for (const executor::DynamicPiece &p : model.pieces_of({m}))
      buckets += (buckets.empty() ? "" : "+") + std::to_string(model.manifest().buckets[p.bucket][0]);
    std::printf("%6lld %10s %10.4f %10.4f %10.3f %10.2g\n", (long long)m, buckets.c_str(), kt, dt, dt / kt, err);
    std::fflush(stdout);
  }
  std::printf("geomean onednn/kiln over %zu values of M: %.3f\n", ms.size(),
              std::exp(log_sum / static_cast<double>(ms.size())));
  return 0;
}
