// The GPU search space on the programs #47 names (a GEMM, a convolution, a dense layer
// with GELU, a softmax), without a GPU: golden sketches for sm_90 and sm_87, and every
// sampled candidate either refused by the postprocessors or lowered to kernels that the
// interpreter, run thread by thread, agrees with the unscheduled program on, and that
// ptxas assembles.
//
// Regenerate the golden only for an intended change of the GPU rules, and say so:
//   KILN_UPDATE_GOLDEN=1 build/tests/kiln_codegen_tests --gtest_filter='CodegenCudaSearch.Golden*'
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "codegen/ptxas.h"
#include "ir/annotations.h"
#include "ir/gpu_lower.h"
#include "ir/interpreter.h"
#include "ops/workload.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::codegen {
namespace {

using nlohmann::json;

json f32(std::vector<int64_t> shape) { return json{{"dtype", "float32"}, {"shape", shape}}; }

json single(const std::string &op, std::vector<json> inputs, json attrs = json::object()) {
  json args = json::array();
  for (size_t i = 0; i < inputs.size(); ++i) args.push_back("in" + std::to_string(i));
  return {{"kiln_workload", 1},
          {"inputs", inputs},
          {"ops", {{{"op", op}, {"args", args}, {"attrs", attrs}}}},
          {"outputs", {"op0"}}};
}

struct Program {
  std::string name;
  ops::Workload workload;
};

// Small enough for the interpreter to run every thread of every candidate.
std::vector<Program> programs() {
  json dense_gelu = {{"kiln_workload", 1},
                     {"inputs", {f32({32, 64}), f32({48, 64}), f32({48})}},
                     {"ops",
                      {{{"op", "dense"}, {"args", {"in0", "in1", "in2"}}, {"attrs", json::object()}},
                       {{"op", "gelu"}, {"args", {"op0"}}, {"attrs", json::object()}}}},
                     {"outputs", {"op1"}}};
  return {
      {"gemm", ops::Workload::from_json(single("matmul", {f32({64, 32}), f32({32, 64})}))},
      // Prime extents: tiles that do not divide them, the last block's partial.
      {"gemm_odd", ops::Workload::from_json(single("matmul", {f32({61, 16}), f32({16, 67})}))},
      {"conv2d", ops::Workload::from_json(single("conv2d", {f32({1, 8, 10, 10}), f32({16, 8, 3, 3})},
                                                 {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"groups", 1}}))},
      {"dense_gelu", ops::Workload::from_json(dense_gelu)},
      {"softmax", ops::Workload::from_json(single("softmax", {f32({8, 100})}, {{"axis", -1}}))},
  };
}

const char *const kArchs[] = {"sm_90", "sm_87"};

bool updating() {
  const char *v = std::getenv("KILN_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

// The sketches' instructions (what the rules decided, not the samples).
json sketch_summary(const std::vector<ir::Trace> &sketches) {
  json out = json::array();
  for (const ir::Trace &t : sketches) {
    json kinds = json::array();
    for (const ir::Instruction &inst : t.instructions) {
      std::string line(inst.kind->name);
      if (inst.attrs.contains("thread")) line += " " + inst.attrs["thread"].get<std::string>();
      if (inst.attrs.contains("scope")) line += " " + inst.attrs["scope"].get<std::string>();
      if (inst.attrs.contains("key")) line += " " + inst.attrs["key"].get<std::string>();
      kinds.push_back(line);
    }
    out.push_back(kinds);
  }
  return out;
}

TEST(CodegenCudaSearch, GoldenSketches) {
  const std::string path = std::string(KILN_SOURCE_DIR) + "/tests/search/golden/gpu_sketches.json";
  json actual = json::object();
  for (const char *arch : kArchs) {
    Target target = Target::parse(std::string("cuda -arch=") + arch);
    search::SearchSpace space = search::default_search_space(target);
    for (const Program &p : programs()) {
      ir::PrimFunc f = te::lower(p.workload.build_dag(), p.name);
      actual[arch][p.name] = sketch_summary(search::generate_sketches(f, space.rules, 0));
    }
  }
  if (updating()) {
    std::ofstream(path) << actual.dump(1) << "\n";
    GTEST_SKIP() << "golden written: " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << "; write it with KILN_UPDATE_GOLDEN=1";
  json expected = json::parse(in);
  for (const char *arch : kArchs) {
    for (const Program &p : programs()) {
      EXPECT_EQ(actual[arch][p.name], expected[arch][p.name]) << arch << " " << p.name;
    }
  }
  // What the golden holds, said in words: the reductions' first sketch is tiled for
  // thread blocks with shared-memory inputs, GELU joins the dense layer's write-back.
  auto has = [&](const std::string &program, const std::string &line) {
    std::string text = actual["sm_90"][program][0].dump();
    return text.find(line) != std::string::npos;
  };
  for (const char *program : {"gemm", "conv2d", "dense_gelu"}) {
    SCOPED_TRACE(program);
    EXPECT_TRUE(has(program, "cache_read shared"));
    EXPECT_TRUE(has(program, "cache_write local"));
    EXPECT_TRUE(has(program, "bind blockIdx.x"));
    EXPECT_TRUE(has(program, "kiln.cooperative_fetch"));
  }
  EXPECT_TRUE(has("dense_gelu", "reverse_compute_inline"));
  EXPECT_FALSE(has("softmax", "cache_read shared")) << "softmax's rows are shared by threads, not tiled";
  EXPECT_TRUE(has("softmax", "reorder")) << "softmax's first sketch reduces its rows across threads";
  // Rows reduced to one value each read every element once: with many rows still no
  // tiling (nothing to share), while a product as small as the example is tiled.
  Target target = Target::parse("cuda -arch=sm_90");
  search::SearchSpace space = search::default_search_space(target);
  ir::PrimFunc rows =
      te::lower(ops::Workload::from_json(single("softmax", {f32({256, 512})}, {{"axis", -1}})).build_dag(), "softmax");
  EXPECT_EQ(sketch_summary(search::generate_sketches(rows, space.rules, 0)).dump().find("cache_read shared"),
            std::string::npos);
}

// Operators whose rows are reduced to statistics that the rest of the row then reads.
std::vector<std::pair<std::string, ops::Workload>> row_statistics() {
  return {
      {"softmax", ops::Workload::from_json(single("softmax", {f32({32, 1000})}, {{"axis", -1}}))},
      {"layer_norm", ops::Workload::from_json(single("layer_norm", {f32({16, 768}), f32({768}), f32({768})},
                                                     {{"axis", -1}, {"epsilon", 1e-5}}))},
  };
}

// Runs the candidate's kernels thread by thread and compares with the program itself.
void expect_kernels_agree(const ir::PrimFunc &f, const ir::PrimFunc &scheduled, size_t n_inputs, uint64_t seed,
                          const ir::GpuLimits &limits) {
  ir::GpuProgram p = ir::lower_for_gpu(scheduled, limits);
  std::mt19937_64 rng(seed);
  std::vector<ir::HostTensor> all;
  for (size_t i = 0; i < f.params.size(); ++i) {
    all.push_back(ir::HostTensor::like(f.params[i]));
    if (i < n_inputs) all.back().fill_random(rng, 0.1, 2.0);
  }
  std::vector<ir::HostTensor> want =
      ir::interpret(f, std::vector<ir::HostTensor>(all.begin(), all.begin() + static_cast<long>(n_inputs)));
  std::vector<ir::HostTensor *> args;
  for (ir::HostTensor &t : all) args.push_back(&t);
  ir::interpret_gpu(p, args);
  for (size_t o = 0; o < want.size(); ++o) EXPECT_LT(ir::relative_l2_error(all[n_inputs + o], want[o]), 1e-5);
}

// Rows reduced to one value each (a 1000-wide softmax, a layer norm over 768, a global
// average pool over 7x7) get sketches whose threads share each row (cross_thread_reduction:
// the reduction split into threadIdx.x and a serial part, reordered, one thread block per
// row); their candidates, rows not a multiple of the threads included, give what the
// program gives, thread by thread, and assemble.
TEST(CodegenCudaSearch, RowsAreReducedByTheThreadsOfABlock) {
  std::string ptxas = find_ptxas();
  Compiler compiler;
  Target target = Target::parse("cuda -arch=sm_90");
  search::SearchSpace space = search::default_search_space(target);
  ir::GpuLimits limits =
      ir::GpuLimits::of(target.max_threads_per_block, target.max_shared_memory_bytes, target.max_registers_per_thread);
  std::vector<std::pair<std::string, ops::Workload>> rows = row_statistics();
  rows.push_back({"global_avg_pool2d", ops::Workload::from_json(single("global_avg_pool2d", {f32({1, 64, 7, 7})}))});
  for (const auto &[name, workload] : rows) {
    SCOPED_TRACE(name);
    ir::PrimFunc f = te::lower(workload.build_dag(), name);
    int shared_rows = 0, assembled = 0;
    for (const ir::Trace &sketch : search::generate_sketches(f, space.rules, 0)) {
      if (sketch.to_json().dump().find("\"reorder\"") == std::string::npos) continue;
      ++shared_rows;
      for (uint64_t seed = 0; seed < 3; ++seed) {
        std::optional<search::Candidate> c = search::realize(f, sketch, space.postprocessors, seed);
        ASSERT_TRUE(c) << "seed " << seed;
        expect_kernels_agree(f, c->func, workload.inputs.size(), seed, limits);
        if (ptxas.empty() || seed != 0) continue;
        PtxasResult r = run_ptxas(compiler.build_cuda(c->func, target).ptx, "sm_90", ptxas);
        EXPECT_FALSE(r.kernels.empty()) << r.log;
        ++assembled;
      }
    }
    EXPECT_GT(shared_rows, 0) << "no sketch shares the rows between threads";
    if (!ptxas.empty()) EXPECT_GT(assembled, 0);
  }
}

// A softmax's normalization and a layer norm's output read their rows' statistics: a
// sketch computes those at the consumer's rows (cross_thread_reduction), so the whole
// operator is one kernel with the statistics in shared memory; its candidates give what
// the program gives, thread by thread, and assemble.
TEST(CodegenCudaSearch, StatisticsAreComputedAtTheirConsumersRows) {
  std::string ptxas = find_ptxas();
  Compiler compiler;
  Target target = Target::parse("cuda -arch=sm_90");
  search::SearchSpace space = search::default_search_space(target);
  ir::GpuLimits limits =
      ir::GpuLimits::of(target.max_threads_per_block, target.max_shared_memory_bytes, target.max_registers_per_thread);
  for (const auto &[name, workload] : row_statistics()) {
    SCOPED_TRACE(name);
    ir::PrimFunc f = te::lower(workload.build_dag(), name);
    int one_kernel = 0;
    for (const ir::Trace &sketch : search::generate_sketches(f, space.rules, 0)) {
      for (uint64_t seed = 0; seed < 3; ++seed) {
        std::optional<search::Candidate> c = search::realize(f, sketch, space.postprocessors, seed);
        if (!c) continue;
        ir::GpuProgram program = ir::lower_for_gpu(c->func, limits);
        if (program.kernels.size() != 1) break;
        ++one_kernel;
        EXPECT_TRUE(program.global_scratch.empty()) << "the statistics stay in the thread block";
        EXPECT_GE(program.kernels[0].shared.size(), 2u) << "each statistic in shared memory";
        expect_kernels_agree(f, c->func, workload.inputs.size(), seed, limits);
        if (ptxas.empty() || seed != 0) continue;
        EXPECT_FALSE(run_ptxas(compiler.build_cuda(c->func, target).ptx, "sm_90", ptxas).kernels.empty());
      }
    }
    EXPECT_GT(one_kernel, 0) << "no sketch computes the statistics at their consumer's rows";
  }
}

// Every block's sampled unroll depth (gpu_unroll: 0 … 1024) reaches the kernels: a
// thread's loops that LLVM keeps rolled at 0 (a serial pass over a row of 768) are
// unrolled at 1024 (other PTX); both agree with the program thread by thread.
TEST(CodegenCudaSearch, SampledUnrollDepthsReachTheKernels) {
  Compiler compiler;
  Target target = Target::parse("cuda -arch=sm_90");
  search::SearchSpace space = search::default_search_space(target);
  ir::GpuLimits limits =
      ir::GpuLimits::of(target.max_threads_per_block, target.max_shared_memory_bytes, target.max_registers_per_thread);
  int changed = 0, candidates = 0;
  for (const auto &[name, workload] : row_statistics()) {
    ir::PrimFunc f = te::lower(workload.build_dag(), name);
    for (const ir::Trace &sketch : search::generate_sketches(f, space.rules, 0)) {
      for (uint64_t seed = 0; seed < 1; ++seed) {
        std::optional<search::Candidate> c = search::realize(f, sketch, space.postprocessors, seed);
        if (!c) continue;
        ++candidates;
        // The depth of every block at once: each sample_categorical a kiln.unroll reads.
        std::set<std::string> depths;
        for (const ir::Instruction &i : c->trace.instructions)
          if (i.kind->name == "annotate" && i.attrs.value("key", "") == ir::annotation::kUnrollStep)
            depths.insert(i.inputs.at(1).get<std::string>());
        ASSERT_FALSE(depths.empty()) << name << ": a block without an unroll depth";
        auto ptx_at = [&](int64_t choice) {
          ir::Trace t = c->trace;
          for (size_t k = 0; k < t.instructions.size(); ++k)
            for (const ir::TraceRV &out : t.instructions[k].outputs)
              if (depths.count(out.name)) t = t.with_decision(k, choice);
          ir::Schedule sch = ir::Schedule::replay(f, t);
          for (const auto &post : space.postprocessors) EXPECT_TRUE(post->apply(sch));
          expect_kernels_agree(f, sch.func(), workload.inputs.size(), seed, limits);
          return compiler.build_cuda(sch.func(), target).ptx;
        };
        changed += ptx_at(0) != ptx_at(4);
      }
    }
  }
  std::printf("%d of %d candidates compile to other PTX unrolled\n", changed, candidates);
  EXPECT_GT(changed, 0);
}

TEST(CodegenCudaSearch, SampledCandidatesAreRefusedOrRunAndAssemble) {
  std::string ptxas = find_ptxas();
  Compiler compiler;
  for (const char *arch : kArchs) {
    Target target = Target::parse(std::string("cuda -arch=") + arch);
    search::SearchSpace space = search::default_search_space(target);
    ir::GpuLimits limits = ir::GpuLimits::of(target.max_threads_per_block, target.max_shared_memory_bytes,
                                             target.max_registers_per_thread);
    for (const Program &p : programs()) {
      SCOPED_TRACE(std::string(arch) + " " + p.name);
      ir::PrimFunc f = te::lower(p.workload.build_dag(), p.name);
      std::vector<ir::Trace> sketches = search::generate_sketches(f, space.rules, 0);
      ASSERT_FALSE(sketches.empty());
      int realized = 0, refused = 0, tiled = 0, partial = 0, assembled = 0;
      for (size_t s = 0; s < sketches.size(); ++s) {
        for (uint64_t seed = 0; seed < 6; ++seed) {
          std::optional<search::Candidate> c = search::realize(f, sketches[s], space.postprocessors, seed);
          if (!c) {
            ++refused;  // a tiling over the thread or shared-memory limits: verify_gpu said no
            continue;
          }
          ++realized;
          const std::string trace = c->trace.to_json().dump();
          if (trace.find("\"shared\"") != std::string::npos) ++tiled;
          if (trace.find("\"sample_tile\"") != std::string::npos) ++partial;
          expect_kernels_agree(f, c->func, p.workload.inputs.size(), seed, limits);
          if (ptxas.empty() || seed % 3 != 0) continue;
          CudaModule m = compiler.build_cuda(c->func, target);
          PtxasResult r = run_ptxas(m.ptx, arch, ptxas);
          EXPECT_FALSE(r.kernels.empty()) << r.log;
          for (const auto &kernel : r.kernels) EXPECT_EQ(kernel.arch, arch);
          ++assembled;
        }
      }
      std::printf("%s %s: %d sketches, %d candidates realized (%d tiled), %d refused, %d assembled\n", arch,
                  p.name.c_str(), static_cast<int>(sketches.size()), realized, tiled, refused, assembled);
      EXPECT_GT(realized, 0) << refused << " refused";
      if (p.name != "softmax") {
        EXPECT_GT(tiled, 0) << "no tiled candidate realized (" << refused << " refused)";
      }
      // Prime extents are tiled with tiles that need not divide them; the others perfectly.
      if (p.name == "gemm_odd")
        EXPECT_GT(partial, 0);
      else
        EXPECT_EQ(partial, 0);
      if (!ptxas.empty()) {
        EXPECT_GT(assembled, 0);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::codegen
