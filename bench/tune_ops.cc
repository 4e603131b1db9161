// The tune_ops suite: each operator tuned by Kiln (TaskTuner with the XGBoost cost
// model, resumable through a database file), then the best program timed side by side
// with oneDNN in the same process (five rounds of a phase of Kiln's blocks of calls and
// a phase of oneDNN's; printed: the ratio of the median blocks and of the fastest).
// Convolutions take and return NCHW tensors as ONNX models do, so oneDNN's time
// includes the activation reorders an NCHW user pays (weights are reordered once,
// untimed); its time in its preferred layout is printed for reference. Weights are
// constants of the workloads (layout rewrite: Kiln packs them once, untimed, when its
// program copies them into panels); `--no-layout-rewrite 1` tunes without, as for
// weights that change between calls. oneDNN's matmul then reads W as given ("(pref)":
// reordered once into its preferred layout).
//
// Usage: kiln_bench_tune_ops [--trials N] [--only NAME[,NAME...]] [--db FILE] [--cost-model xgb|random] [--seed S]
//                            [--no-layout-rewrite 1]
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"
#include "costmodel/xgb_model.h"
#include "ir/host_tensor.h"
#include "ir/schedule/schedule.h"
#include "measure/artifact.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "scheduler/task_tuner.h"
#include "support/clock.h"
#include "support/json_read.h"
#include "te/te.h"

using namespace kiln;  // NOLINT: benchmark program
using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

struct Conv {
  int64_t n, c, h, w, k, r, s, stride, pad, groups;
};

struct Case {
  std::string name;
  ops::Workload workload;
  std::optional<Conv> conv;  // else a dense layer (x * W^T + bias, optional GELU)
  int64_t m = 0, n = 0, k = 0;
  bool gelu = false, bias = false;
};

ir::TensorType f32(std::vector<int64_t> s) { return ir::TensorType{std::move(s), ir::DType::kFloat32}; }

Case conv_case(const std::string &name, Conv c) {
  ops::Workload w;
  w.inputs = {f32({c.n, c.c, c.h, c.w}), f32({c.k, c.c / c.groups, c.r, c.s}), f32({c.k})};
  w.ops.push_back(
      ops::OpCall{"conv2d",
                  {{"strides", {c.stride, c.stride}}, {"pads", {c.pad, c.pad, c.pad, c.pad}}, {"groups", c.groups}},
                  {"in0", "in1", "in2"}});
  w.ops.push_back(ops::OpCall{"relu", nlohmann::json::object(), {"op0"}});
  w.outputs = {"op1"};
  return Case{name, w, c};
}

Case dense_case(const std::string &name, int64_t m, int64_t n, int64_t k, bool bias, bool gelu) {
  ops::Workload w;
  w.inputs = {f32({m, k}), f32({n, k})};
  std::vector<std::string> args = {"in0", "in1"};
  if (bias) {
    w.inputs.push_back(f32({n}));
    args.push_back("in2");
  }
  w.ops.push_back(ops::OpCall{"dense", nlohmann::json::object(), args});
  if (gelu) w.ops.push_back(ops::OpCall{"gelu", nlohmann::json::object(), {"op0"}});
  w.outputs = {gelu ? "op1" : "op0"};
  Case c{name, w, std::nullopt, m, n, k, gelu, bias};
  return c;
}

std::vector<Case> suite() {
  return {
      dense_case("gemm_1024", 1024, 1024, 1024, false, false),
      dense_case("bert_dense_768x768", 128, 768, 768, true, false),
      dense_case("bert_dense_3072x768_gelu", 128, 3072, 768, true, true),
      dense_case("bert_dense_768x3072", 128, 768, 3072, true, false),
      conv_case("resnet_3x3_64_56", {1, 64, 56, 56, 64, 3, 3, 1, 1, 1}),
      conv_case("resnet_3x3_256_14", {1, 256, 14, 14, 256, 3, 3, 1, 1, 1}),
      conv_case("resnet_1x1_64_256_56", {1, 64, 56, 56, 256, 1, 1, 1, 0, 1}),
      conv_case("resnet_3x3_512_7", {1, 512, 7, 7, 512, 3, 3, 1, 1, 1}),
      conv_case("resnet_stem_7x7_s2", {1, 3, 224, 224, 64, 7, 7, 2, 3, 1}),
      conv_case("mobilenet_dw_96_112_s2", {1, 96, 112, 112, 96, 3, 3, 2, 1, 96}),
      conv_case("mobilenet_dw_144_56", {1, 144, 56, 56, 144, 3, 3, 1, 1, 144}),
      // Shapes without good factors: 197 tokens (ViT-B/16), 1001 classes.
      dense_case("vit_dense_197x768x768", 197, 768, 768, true, false),
      dense_case("classifier_1x2048_1001", 1, 1001, 2048, true, false),
      conv_case("conv_3x3_256_1001_14", {1, 256, 14, 14, 1001, 3, 3, 1, 1, 1}),
  };
}

// oneDNN's side of one case: a function that runs one inference on NCHW/row-major
// user buffers (inputs already filled), and optionally one in its preferred layout.
struct Peer {
  std::function<void()> run_user_layout;
  std::function<void()> run_preferred_layout;
};

Peer make_peer(const Case &c, dnnl::engine &eng, dnnl::stream &strm, std::vector<ir::HostTensor> &args) {
  Peer peer;
  if (!c.conv) {
    // matmul: src [M,K] x weights [K,N] given as W[N,K] (strides {1,K}), + bias, GELU post-op.
    memory::desc src({c.m, c.k}, Dt::f32, Tag::ab), wei({c.k, c.n}, Dt::f32, Tag::ba),
        dst({c.m, c.n}, Dt::f32, Tag::ab);
    memory::desc bia({1, c.n}, Dt::f32, Tag::ab);
    dnnl::primitive_attr attr;
    if (c.gelu) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      attr.set_post_ops(po);
    }
    auto d = c.bias ? dnnl::matmul::desc(src, wei, bia, dst) : dnnl::matmul::desc(src, wei, dst);
    auto pd = dnnl::matmul::primitive_desc(d, attr, eng);
    auto prim = std::make_shared<dnnl::matmul>(pd);
    auto m_src = std::make_shared<memory>(src, eng, args[0].data());
    auto m_wei = std::make_shared<memory>(wei, eng, args[1].data());
    auto m_dst = std::make_shared<memory>(dst, eng, args.back().data());
    std::shared_ptr<memory> m_bia;
    if (c.bias) m_bia = std::make_shared<memory>(bia, eng, args[2].data());
    peer.run_user_layout = [=, &strm] {
      std::unordered_map<int, memory> a{{DNNL_ARG_SRC, *m_src}, {DNNL_ARG_WEIGHTS, *m_wei}, {DNNL_ARG_DST, *m_dst}};
      if (m_bia) a.insert({DNNL_ARG_BIAS, *m_bia});
      prim->execute(strm, a);
      strm.wait();
    };
    // Its preferred weight layout, reordered once (what a framework keeping it pays).
    memory::desc wei_any({c.k, c.n}, Dt::f32, Tag::any);
    auto d_any = c.bias ? dnnl::matmul::desc(src, wei_any, bia, dst) : dnnl::matmul::desc(src, wei_any, dst);
    auto pd_any = dnnl::matmul::primitive_desc(d_any, attr, eng);
    auto prim_any = std::make_shared<dnnl::matmul>(pd_any);
    auto m_wei_any = std::make_shared<memory>(pd_any.weights_desc(), eng);
    dnnl::reorder(*m_wei, *m_wei_any).execute(strm, *m_wei, *m_wei_any);
    strm.wait();
    peer.run_preferred_layout = [=, &strm] {
      std::unordered_map<int, memory> a{{DNNL_ARG_SRC, *m_src}, {DNNL_ARG_WEIGHTS, *m_wei_any}, {DNNL_ARG_DST, *m_dst}};
      if (m_bia) a.insert({DNNL_ARG_BIAS, *m_bia});
      prim_any->execute(strm, a);
      strm.wait();
    };
    return peer;
  }
  const Conv &v = *c.conv;
  int64_t oh = (v.h + 2 * v.pad - v.r) / v.stride + 1, ow = (v.w + 2 * v.pad - v.s) / v.stride + 1;
  memory::dims src_dims{v.n, v.c, v.h, v.w}, dst_dims{v.n, v.k, oh, ow}, bias_dims{v.k};
  memory::dims wei_dims = v.groups > 1 ? memory::dims{v.groups, v.k / v.groups, v.c / v.groups, v.r, v.s}
                                       : memory::dims{v.k, v.c, v.r, v.s};
  Tag wei_tag = v.groups > 1 ? Tag::goihw : Tag::oihw;
  memory::desc src_any(src_dims, Dt::f32, Tag::any), wei_any(wei_dims, Dt::f32, Tag::any),
      dst_any(dst_dims, Dt::f32, Tag::any), bia(bias_dims, Dt::f32, Tag::a);
  dnnl::post_ops po;
  po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_any,
                                    wei_any, bia, dst_any, {v.stride, v.stride}, {0, 0}, {v.pad, v.pad},
                                    {v.pad, v.pad});
  auto pd = dnnl::convolution_forward::primitive_desc(d, attr, eng);
  auto prim = std::make_shared<dnnl::convolution_forward>(pd);
  auto user_src = std::make_shared<memory>(memory::desc(src_dims, Dt::f32, Tag::nchw), eng, args[0].data());
  auto user_wei = memory(memory::desc(wei_dims, Dt::f32, wei_tag), eng, args[1].data());
  auto user_dst = std::make_shared<memory>(memory::desc(dst_dims, Dt::f32, Tag::nchw), eng, args.back().data());
  auto m_bia = std::make_shared<memory>(bia, eng, args[2].data());
  auto conv_src = std::make_shared<memory>(pd.src_desc(), eng);
  auto conv_wei = std::make_shared<memory>(pd.weights_desc(), eng);
  auto conv_dst = std::make_shared<memory>(pd.dst_desc(), eng);
  dnnl::reorder(user_wei, *conv_wei).execute(strm, user_wei, *conv_wei);  // once, untimed
  strm.wait();
  auto to_conv = std::make_shared<dnnl::reorder>(*user_src, *conv_src);
  auto from_conv = std::make_shared<dnnl::reorder>(*conv_dst, *user_dst);
  auto run_conv = [=, &strm] {
    prim->execute(
        strm,
        {{DNNL_ARG_SRC, *conv_src}, {DNNL_ARG_WEIGHTS, *conv_wei}, {DNNL_ARG_BIAS, *m_bia}, {DNNL_ARG_DST, *conv_dst}});
  };
  peer.run_user_layout = [=, &strm] {
    to_conv->execute(strm, *user_src, *conv_src);
    run_conv();
    from_conv->execute(strm, *conv_dst, *user_dst);
    strm.wait();
  };
  peer.run_preferred_layout = [=, &strm] {
    run_conv();
    strm.wait();
  };
  return peer;
}

constexpr int kPhases = 5, kBlocksPerPhase = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  int64_t trials = 1000;
  std::string only, db_path = "tune_ops.db", cost_model = "xgb", target_text = "llvm -mcpu=native -num-cores=2";
  uint64_t seed = 0;
  bool layout_rewrite = true;
  int no_layout_rewrite = 0;
  CLI::App app{"The tune_ops suite: each operator tuned by Kiln, then timed side by side with oneDNN"};
  app.add_option("--trials", trials,
                 "candidates measured per operator in this run (a resumed database adds them to its own)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--only", only, "comma-separated operator names (default: the whole suite)");
  app.add_option("--db", db_path, "tuning database (resumed when it exists)")->capture_default_str();
  app.add_option("--cost-model", cost_model, "xgb or random")
      ->capture_default_str()
      ->check(CLI::IsMember({"xgb", "random"}));
  app.add_option("--seed", seed, "search seed")->capture_default_str();
  app.add_option("--target", target_text,
                 "target Kiln tunes for; an older x86 family than the host's (e.g. -mcpu=znver3 for AVX2 on an "
                 "AVX-512 host) runs here too, beside oneDNN limited the same way with ONEDNN_MAX_CPU_ISA=AVX2")
      ->capture_default_str();
  app.add_option("--no-layout-rewrite", no_layout_rewrite, "1: weights are not constants (no packing ahead of time)")
      ->check(CLI::Range(0, 1));
  CLI11_PARSE(app, argc, argv);
  layout_rewrite = no_layout_rewrite == 0;
  // The --only names, each checked against the suite once.
  const std::vector<Case> cases = suite();
  std::set<std::string> selected;
  for (size_t from = 0; !only.empty() && from <= only.size();) {
    size_t to = std::min(only.find(',', from), only.size());
    std::string name = only.substr(from, to - from);
    if (std::none_of(cases.begin(), cases.end(), [&](const Case &c) { return c.name == name; })) {
      std::string names;
      for (const Case &c : cases) names += " " + c.name;
      std::fprintf(stderr, "--only: no operator '%s' in the suite; it has:%s\n", name.c_str(), names.c_str());
      return 2;
    }
    selected.insert(name);
    from = to + 1;
  }
  measure::LocalRunner runner;  // forked before any thread exists
  std::filesystem::path work = std::filesystem::temp_directory_path() / ("kiln_tune_ops_" + std::to_string(getpid()));
  measure::LocalBuilderPool pool(2, work, 60.0);
  db::Database database = db::Database::open(db_path, db::OpenMode::kCreate);
  codegen::Compiler compiler;
  Target target;
  try {
    target = Target::parse(target_text);
    compiler.llvm_cpu(target);  // rejects a CPU LLVM does not know, before any tuning
  } catch (const std::exception &e) {
    std::fprintf(stderr, "--target: %s\n", e.what());
    return 2;
  }
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  kiln_rt_set_num_threads(2);

  std::printf("%-26s %10s %10s %10s %8s %8s %10s   best GFLOP/s at 64/128/256/512/1000 trials\n", "op", "kiln ms",
              "onednn ms", "(pref) ms", "ratio", "min", "trials/min");
  double log_sum = 0, log_sum_min = 0;
  int count = 0;
  for (Case c : cases) {
    c.workload.inputs[1].constant = layout_rewrite;  // the weights
    if (!selected.empty() && !selected.count(c.name)) continue;
    std::unique_ptr<costmodel::CostModel> model;
    if (cost_model == "random") {
      model = std::make_unique<costmodel::RandomCostModel>(1 + seed);
    } else {
      model = std::make_unique<costmodel::XGBoostCostModel>();
    }
    scheduler::TuneOptions opts;
    opts.trials = trials;
    opts.seed = seed;
    opts.timing.repeat = 3;
    opts.timing.min_repeat_ms = 10;
    scheduler::TaskTuner tuner(c.workload, target, opts, &database, pool, runner, *model);
    scheduler::TuneResult r = tuner.run();
    if (r.best_trace_json.empty()) {
      std::printf("%-26s no valid program found\n", c.name.c_str());
      continue;
    }
    ir::PrimFunc func = te::lower(c.workload.build_dag(), "bench");
    ir::PrimFunc best = ir::Schedule::replay_stored(func, r.best_trace_json).func();
    std::string so = (work / (c.name + ".so")).string();
    compiler.build_artifact(best, target, so);
    measure::detail::LoadedArtifact artifact = measure::detail::load_artifact(so);
    kiln_entry_fn entry = artifact.entry;
    std::mt19937_64 rng(1);
    std::vector<ir::HostTensor> kargs, dargs;
    for (const ir::Buffer &p : func.params) {
      kargs.push_back(ir::HostTensor::like(p));
      kargs.back().fill_random(rng);
    }
    dargs = kargs;
    std::vector<void *> ptrs;
    for (ir::HostTensor &t : kargs) ptrs.push_back(t.data());
    std::vector<ir::HostTensor> packed;  // packed once, untimed, as `kiln compile`d models do at load
    packed.reserve(artifact.packed.size());
    std::vector<void *> prepack_args;
    for (const measure::detail::PackedParam &p : artifact.packed) {
      prepack_args.push_back(ptrs[p.index]);
      prepack_args.push_back(packed.emplace_back(p.layout.dtype, p.layout.shape).data());
      ptrs[p.index] = prepack_args.back();
    }
    if (artifact.prepack && artifact.prepack(prepack_args.data()) != 0)
      std::printf("%s: kiln_prepack failed\n", c.name.c_str());
    Peer peer = make_peer(c, eng, strm, dargs);
    entry(ptrs.data());
    peer.run_user_layout();
    double diff = ir::relative_l2_error(kargs.back(), dargs.back());
    // Blocks of back-to-back calls (~20 ms each), in phases: a phase of Kiln's blocks,
    // a pause, a phase of oneDNN's blocks, a pause, repeated. Within a phase each
    // library's threads have the cores to themselves (alternating single blocks let the
    // two thread pools contend for the 2 cores); repeating the phases spreads the
    // host's slow drift over both sides instead of biasing whichever ran second.
    auto block_of = [](const std::function<void()> &call, int64_t calls) {
      double t0 = support::now_seconds();
      for (int64_t i = 0; i < calls; ++i) call();
      return (support::now_seconds() - t0) / static_cast<double>(calls);
    };
    auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); };
    std::function<void()> kiln_call = [&] { entry(ptrs.data()); };
    int64_t kiln_calls = std::max<int64_t>(1, static_cast<int64_t>(0.02 / block_of(kiln_call, 1)));
    int64_t peer_calls = std::max<int64_t>(1, static_cast<int64_t>(0.02 / block_of(peer.run_user_layout, 1)));
    std::vector<double> tk, td, tp;
    for (int phase = 0; phase < kPhases; ++phase) {
      settle();
      for (int rep = 0; rep < kBlocksPerPhase; ++rep) tk.push_back(block_of(kiln_call, kiln_calls));
      settle();
      for (int rep = 0; rep < kBlocksPerPhase; ++rep) {
        td.push_back(block_of(peer.run_user_layout, peer_calls));
        if (peer.run_preferred_layout) tp.push_back(block_of(peer.run_preferred_layout, peer_calls));
      }
    }
    double k = median(tk), d = median(td);
    double best_ratio = *std::min_element(td.begin(), td.end()) / *std::min_element(tk.begin(), tk.end());
    std::ostringstream curve;
    for (size_t at : {64, 128, 256, 512, 1000})
      curve << (at <= r.best_gflops_curve.size() ? std::to_string(static_cast<int>(r.best_gflops_curve[at - 1])) : "-")
            << (at == 1000 ? "" : "/");
    double per_min = r.progress.elapsed_seconds > 0 ? r.progress.trials / r.progress.elapsed_seconds * 60 : 0;
    std::printf("%-26s %10.3f %10.3f %10s %8.2f %8.2f %10.0f   %s%s\n", c.name.c_str(), k * 1e3, d * 1e3,
                tp.empty() ? "-" : std::to_string(median(tp) * 1e3).substr(0, 6).c_str(), d / k, best_ratio, per_min,
                curve.str().c_str(), diff > 1e-4 ? "  (RESULT DIFFERS FROM ONEDNN)" : "");
    std::fflush(stdout);
    log_sum += std::log(d / k);
    log_sum_min += std::log(best_ratio);
    ++count;
  }
  if (count)
    std::printf(
        "geometric mean ratio (oneDNN time / Kiln time): %.2f of the median blocks, %.2f of the fastest, over %d ops\n",
        std::exp(log_sum / count), std::exp(log_sum_min / count), count);
  std::filesystem::remove_all(work);
  return 0;
}
