// Generated x86-64 code equals the interpreter for every example workload, unscheduled
// and under random legal schedules.
//
// Reproduce one case: KILN_CODEGEN_CASE=<workload>:<seed> kiln_codegen_tests
// Change the count:   KILN_CODEGEN_TRACES=<n> (default 50 per workload)
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"
#include "ir/annotations.h"
#include "ir/functor.h"
#include "ir/interpreter.h"
#include "ir/lower_passes.h"
#include "ir/schedule/schedule.h"
#include "ir/schedule/trace.h"
#include "ops/examples.h"
#include "te/te.h"
#include "tests/common/random_schedule.h"

namespace kiln::codegen {
namespace {

using ir::HostTensor;

int traces_per_workload() {
  const char *env = std::getenv("KILN_CODEGEN_TRACES");
  return env ? std::atoi(env) : 50;
}

std::string temp_dir() {
  static std::string dir = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / ("kiln_codegen_test_" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Loads an artifact into this process and runs it on copies of `inputs`.
std::vector<HostTensor> run_artifact(const std::string &path, const ir::PrimFunc &func,
                                     const std::vector<HostTensor> &inputs) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw std::runtime_error(std::string("dlopen failed: ") + dlerror());
  auto entry = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_ENTRY_SYMBOL));
  const char *info = static_cast<const char *>(dlsym(handle, KILN_INFO_SYMBOL));
  if (!entry || !info) throw std::runtime_error("artifact lacks the ABI symbols");
  std::vector<HostTensor> all(inputs.begin(), inputs.end());
  for (size_t i = inputs.size(); i < func.params.size(); ++i) {
    all.push_back(HostTensor::like(func.params[i]));
    all.back().fill(-777);  // outputs are fully written by a correct kernel
  }
  std::vector<void *> args;
  for (HostTensor &t : all) args.push_back(t.data());
  int32_t rc = entry(args.data());
  dlclose(handle);
  if (rc != 0) throw std::runtime_error("kernel returned " + std::to_string(rc));
  return std::vector<HostTensor>(all.begin() + static_cast<long>(inputs.size()), all.end());
}

void expect_same(const std::vector<HostTensor> &got, const std::vector<HostTensor> &want, const std::string &context) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    if (ir::is_float(got[o].dtype())) {
      double err = ir::relative_l2_error(got[o], want[o]);
      ASSERT_LE(err, 1e-5) << "output " << o << ": relative L2 error " << err << context;
    } else {
      ASSERT_TRUE(ir::exactly_equal(got[o], want[o])) << "integer output " << o << " differs" << context;
    }
  }
}

Compiler &compiler() {
  static Compiler c;
  return c;
}

Target host_target() { return Target::parse("llvm -mcpu=native -num-cores=2"); }

// Tests that inspect generated IR check it for both x86 families on any host: LLVM
// emits code for either anywhere. Tests that run code run it for the host.
struct IsaTarget {
  const char *isa;
  Target target;
};
const std::vector<IsaTarget> &x86_isa_targets() {
  static const std::vector<IsaTarget> targets = {
      {"AVX2", Target::parse("llvm -mcpu=znver3 -mtriple=x86_64-linux-gnu -num-cores=2")},
      {"AVX-512", Target::parse("llvm -mcpu=sapphirerapids -mtriple=x86_64-linux-gnu -num-cores=2")}};
  return targets;
}

// The instructions of `ir_text` that access buffer `name`, found through the alias
// scope lowering attaches to every access ("!alias.scope !N", where list !N holds the
// buffer's scope node, a `!{..., !"name"}`).
std::vector<std::string> accesses_of(const std::string &ir_text, const std::string &name) {
  std::map<std::string, std::string> metadata;  // "!N" -> its text
  std::vector<std::string> lines;
  std::istringstream in(ir_text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    size_t eq = line.find(" = ");
    if (line.rfind("!", 0) == 0 && eq != std::string::npos) metadata[line.substr(0, eq)] = line.substr(eq + 3);
  }
  std::string scope;
  for (const auto &[id, text] : metadata)
    if (text.find(", !\"" + name + "\"}") != std::string::npos && text.find("distinct") == 0) scope = id;
  std::vector<std::string> found;
  if (scope.empty()) return found;
  for (const std::string &line : lines) {
    size_t at = line.find("!alias.scope !");
    if (at == std::string::npos || line.rfind("!", 0) == 0) continue;
    size_t begin = at + std::string("!alias.scope ").size();
    size_t end = line.find_first_of(", ", begin);
    std::string list = metadata[line.substr(begin, end == std::string::npos ? std::string::npos : end - begin)];
    std::istringstream members(list);
    for (std::string token; std::getline(members, token, ',');) {
      token.erase(std::remove_if(token.begin(), token.end(), [](char c) { return c == ' ' || c == '{' || c == '}'; }),
                  token.end());
      if (token == scope || token == "!" + scope) found.push_back(line);
    }
  }
  return found;
}

// Inputs of `dag` with uniform values in [lo, hi], reproducible from `seed`.
std::vector<HostTensor> random_inputs(const te::ComputeDAG &dag, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    inputs.back().fill_random(rng, lo, hi);
  }
  return inputs;
}

// Builds `scheduled` as `<temp>/<name>.so` for `target` and checks its outputs against
// the interpreter's on `unscheduled`.
void expect_artifact_matches(const ir::PrimFunc &scheduled, const ir::PrimFunc &unscheduled,
                             const std::vector<HostTensor> &inputs, const std::string &name,
                             const Target &target = host_target()) {
  std::string path = temp_dir() + "/" + name + ".so";
  compiler().build_artifact(scheduled, target, path);
  expect_same(run_artifact(path, scheduled, inputs), ir::interpret(unscheduled, inputs), "\n" + name);
}

void check_case(const ops::NamedWorkload &w, uint64_t seed, bool schedule) {
  te::ComputeDAG dag = w.workload.build_dag();
  ir::PrimFunc func = te::lower(dag, w.name);
  std::mt19937_64 rng(seed);
  std::vector<HostTensor> inputs;
  for (const te::Tensor &t : dag.inputs) {
    inputs.emplace_back(t.dtype(), t.shape());
    // Positive inputs keep log/sqrt/pow finite so every element is compared.
    inputs.back().fill_random(rng, ir::is_float(t.dtype()) ? 0.1 : -3, 2.0);
  }
  std::vector<HostTensor> want = ir::interpret(func, inputs);
  ir::Schedule sch(func, seed);
  if (schedule) {
    int steps = 4 + static_cast<int>(rng() % 10);
    for (int s = 0; s < steps; ++s) {
      try {
        test_support::random_step(sch, rng);
      } catch (const ir::ScheduleError &) {
      }
    }
  }
  std::string context = "\nreproduce: KILN_CODEGEN_CASE=" + w.name + ":" + std::to_string(seed) +
                        "\ntrace: " + sch.trace().to_json().dump() + "\nprogram:\n" + ir::to_string(sch.func());
  static std::atomic<int> counter{0};
  std::string path = temp_dir() + "/k" + std::to_string(counter++) + ".so";
  try {
    compiler().build_artifact(sch.func(), host_target(), path);
  } catch (const CodegenError &e) {
    // Thread-bound loops are legal schedules that CPU code generation rejects.
    if (std::string(e.what()).find("bound to") != std::string::npos) return;
    FAIL() << "codegen failed: " << e.what() << context;
  }
  std::vector<HostTensor> got = run_artifact(path, sch.func(), inputs);
  std::filesystem::remove(path);
  expect_same(got, want, context);
}

class CodegenX86 : public ::testing::TestWithParam<ops::NamedWorkload> {};

TEST_P(CodegenX86, UnscheduledAndRandomSchedulesMatchInterpreter) {
  const ops::NamedWorkload &w = GetParam();
  if (const char *only = std::getenv("KILN_CODEGEN_CASE")) {
    std::string spec(only);
    size_t colon = spec.rfind(':');
    if (spec.substr(0, colon) != w.name) GTEST_SKIP();
    check_case(w, std::stoull(spec.substr(colon + 1)), true);
    return;
  }
  check_case(w, 0, /*schedule=*/false);
  if (HasFatalFailure()) return;
  std::hash<std::string> h;
  for (int i = 0; i < traces_per_workload(); ++i) {
    check_case(w, (h(w.name) % 100000) * 1000 + 500 + static_cast<uint64_t>(i), true);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, CodegenX86, ::testing::ValuesIn(ops::small_example_workloads()),
                         [](const ::testing::TestParamInfo<ops::NamedWorkload> &info) { return info.param.name; });

// A padded 3x3 convolution of a 4-channel size x size image whose output width is
// vectorized innermost: the padded input is read with the convolution's stride.
struct ScheduledConv {
  te::ComputeDAG dag;
  ir::PrimFunc func;
  ir::Schedule sch;
};

ScheduledConv strided_conv_vectorized_along_width(int64_t size, int64_t stride) {
  ops::Workload w =
      ops::Workload::single("conv2d", {{{1, 4, size, size}, ir::DType::kFloat32}, {{4, 4, 3, 3}, ir::DType::kFloat32}},
                            {{"strides", {stride, stride}}, {"pads", {1, 1, 1, 1}}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "conv_s2");
  ir::Schedule sch(func);
  std::vector<ir::LoopRV> l = sch.get_loops(sch.get_block("conv2d"));  // n k oh ow | c ry rx
  if (l.size() != 7u) throw std::logic_error("unexpected convolution loop nest");
  sch.reorder({l[4], l[5], l[6], l[3]});
  sch.vectorize(l[3]);  // input index stride * ow + rx
  return {std::move(dag), std::move(func), std::move(sch)};
}

// A stride-2 convolution vectorized along its output width reads its input with stride
// 2: one contiguous span shuffled into lanes, not a gather, and still the right values.
TEST(CodegenX86Strided, StrideTwoLoadsAreShuffledSpans) {
  ScheduledConv c = strided_conv_vectorized_along_width(21, 2);  // 11 lanes
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(c.sch.func(), t.target);
    EXPECT_NE(ir_text.find("shufflevector <21 x float>"), std::string::npos) << t.isa << "\n" << ir_text;
    EXPECT_EQ(ir_text.find("masked.gather"), std::string::npos) << t.isa << "\n" << ir_text;
  }

  expect_artifact_matches(c.sch.func(), c.func, random_inputs(c.dag, 3), "strided");
}

// bfloat16 is loaded and stored as its 16 bits in vectors on every ISA level (AVX2,
// AVX-512, with or without AVX512-BF16): no scalarized lanes, no LLVM bfloat type the
// x86 backend of LLVM 16 cannot lower; the values match the interpreter on this host.
TEST(CodegenX86BFloat16, VectorLoadsAndStoresOfItsBitsOnEveryIsaLevel) {
  ops::Workload w = ops::Workload::single("relu", {{{4, 32}, ir::DType::kBFloat16}}, nlohmann::json::object());
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "relu_bf16");
  ir::Schedule sch(func);
  std::vector<ir::LoopRV> loops = sch.get_loops(sch.get_block("relu"));
  sch.vectorize(sch.split(loops[1], {int64_t{2}, int64_t{16}})[1]);
  std::vector<Target> targets;
  for (const IsaTarget &t : x86_isa_targets()) targets.push_back(t.target);
  targets.push_back(Target::parse("llvm -mcpu=znver3 -mtriple=x86_64-linux-gnu -mattr=+avx512bf16"));
  for (const Target &t : targets) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t);
    EXPECT_NE(ir_text.find("load <16 x i16>"), std::string::npos) << t.str() << "\n" << ir_text;
    EXPECT_NE(ir_text.find("store <16 x i16>"), std::string::npos) << t.str() << "\n" << ir_text;
    // (The artifact's info JSON names the dtype "bfloat16"; the IR type would be "bfloat".)
    EXPECT_EQ(ir_text.find("x bfloat>"), std::string::npos) << t.str() << "\n" << ir_text;
    EXPECT_EQ(ir_text.find(" bfloat "), std::string::npos) << t.str() << "\n" << ir_text;
    EXPECT_FALSE(compiler().emit_assembly(sch.func(), t).empty()) << t.str();
  }
  expect_artifact_matches(sch.func(), func, random_inputs(dag, 7), "relu_bf16");
}

// With a power-of-two lane count the span is read as whole vectors, the last one
// ending at the last lane's element: an odd-sized span load (<15 x float>) is
// legalized element by element.
TEST(CodegenX86Strided, PowerOfTwoLanesLoadWholeVectors) {
  // 8 output columns each: a span of 15, 22 and 29 elements, read as 2, 3 and 4 vectors.
  for (auto [size, stride] : {std::pair<int64_t, int64_t>{15, 2}, {22, 3}, {29, 4}}) {
    std::string context = "stride " + std::to_string(stride);
    ScheduledConv c = strided_conv_vectorized_along_width(size, stride);
    for (const IsaTarget &t : x86_isa_targets()) {
      std::string ir_text = compiler().emit_llvm_ir(c.sch.func(), t.target);
      std::string span = "<" + std::to_string(7 * stride + 1) + " x float>";
      EXPECT_EQ(ir_text.find(span), std::string::npos) << context << ", " << t.isa << "\n" << ir_text;
      EXPECT_NE(ir_text.find("load <8 x float>"), std::string::npos) << context << ", " << t.isa << "\n" << ir_text;
      EXPECT_EQ(ir_text.find("masked.gather"), std::string::npos) << context << ", " << t.isa << "\n" << ir_text;
    }
    expect_artifact_matches(c.sch.func(), c.func, random_inputs(c.dag, 4),
                            "strided_whole_vectors_" + std::to_string(stride));
  }
}

// The same with the padding inlined: the stride-2 reads are masked at the borders. A
// masked span load (lane bits spread to every second element) replaces the gather, and
// the masked-off lanes left of column 0 are never read.
TEST(CodegenX86Strided, PaddedStrideTwoLoadsAreMaskedSpans) {
  ops::Workload w =
      ops::Workload::single("conv2d", {{{1, 3, 16, 16}, ir::DType::kFloat32}, {{4, 3, 3, 3}, ir::DType::kFloat32}},
                            {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "conv_s2_padded");
  ir::Schedule sch(func);
  sch.compute_inline(sch.get_block("pad"));
  std::vector<ir::LoopRV> l = sch.get_loops(sch.get_block("conv2d"));  // n k oh ow | c ry rx
  ASSERT_EQ(l.size(), 7u);
  sch.reorder({l[4], l[5], l[6], l[3]});
  sch.vectorize(l[3]);  // 8 lanes, input column 2 * ow + rx - 1
  sch.parallel(l[1]);
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    EXPECT_EQ(ir_text.find("masked.gather"), std::string::npos) << t.isa << "\n" << ir_text;
    EXPECT_NE(ir_text.find("masked.load.v16f32"), std::string::npos) << t.isa << "\n" << ir_text;
  }

  expect_artifact_matches(sch.func(), func, random_inputs(dag, 9), "strided_padded");
}

// A dense layer's W[n, k] packed per column tile and read along n by the vectorized
// loop: lowering stores the panel [k, n], so the hot loop loads vectors, not gathers.
// (The packing loop itself reads W across rows; LLVM may gather there, once per tile.)
TEST(CodegenX86Strided, PackedTransposedPanelIsStoredForVectorLoads) {
  ops::Workload w =
      ops::Workload::single("dense", {{{16, 256}, ir::DType::kFloat32}, {{24, 256}, ir::DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "dense");
  ir::Schedule sch(func);
  ir::BlockRV dense = sch.get_block("dense");
  std::vector<ir::LoopRV> l = sch.get_loops(dense);  // i j | k
  std::vector<ir::LoopRV> j = sch.split(l[1], {int64_t{-1}, int64_t{8}});
  sch.reorder({j[0], l[0], l[2], j[1]});
  ir::BlockRV panel = sch.cache_read(dense, 2, "local");  // reads: dense, in0, in1
  sch.compute_at(panel, j[0]);
  sch.vectorize(j[1]);
  ir::PrimFunc lowered = ir::lower_for_codegen(sch.func());
  bool transposed = false;
  ir::for_each_stmt(lowered.body, [&](const ir::Stmt &s) {
    if (const auto *b = s.as<ir::BlockNode>())
      for (const ir::Buffer &buf : b->alloc_buffers)
        transposed = transposed || buf->shape == std::vector<int64_t>{256, 8};
  });
  EXPECT_TRUE(transposed) << ir::to_string(lowered);
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    std::vector<std::string> panel_reads = accesses_of(ir_text, "in1_local");
    EXPECT_TRUE(std::any_of(panel_reads.begin(), panel_reads.end(),
                            [](const std::string &line) { return line.find("load <8 x float>") != std::string::npos; }))
        << t.isa << "\n"
        << ir_text;
    for (const std::string &line : panel_reads)
      EXPECT_EQ(line.find("masked.gather"), std::string::npos) << t.isa << ": " << line;
  }

  expect_artifact_matches(sch.func(), func, random_inputs(dag, 5), "panel");
}

// Output features tiled by 16 that do not divide 67 (sample_tile): the four full tiles
// run predicate-free code (version_partial_tiles), whose stores are whole vectors; the
// partial fifth tile masks its three valid lanes' loads and stores.
TEST(CodegenX86Padded, FullTilesAreVersionedApartAndThePartialTileIsMasked) {
  ops::Workload w = ops::Workload::single("dense", {{{37, 48}, ir::DType::kFloat32}, {{67, 48}, ir::DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "dense_padded");
  ir::Schedule sch(func);
  ir::BlockRV dense = sch.get_block("dense");
  std::vector<ir::LoopRV> l = sch.get_loops(dense);  // i j | k
  std::vector<ir::ExprRV> tiles = sch.sample_tile(l[1], 2, 16, 16, std::vector<int64_t>{-1, 16});
  std::vector<ir::LoopRV> j = sch.split(l[1], {ir::Factor(tiles[0]), ir::Factor(tiles[1])});
  ASSERT_EQ(sch.value(tiles[0]), 5);
  sch.reorder({j[0], l[0], l[2], j[1]});
  sch.vectorize(j[1]);
  sch.parallel(j[0]);
  ir::PrimFunc lowered = ir::lower_for_codegen(sch.func());
  int branches = 0;
  ir::for_each_stmt(lowered.body, [&](const ir::Stmt &s) { branches += s.as<ir::IfThenElseNode>() != nullptr; });
  EXPECT_EQ(branches, 1) << ir::to_string(lowered);  // one version for the init and the update
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    EXPECT_NE(ir_text.find("masked.store"), std::string::npos) << t.isa << "\n" << ir_text;
    EXPECT_NE(ir_text.find("store <16 x float>"), std::string::npos) << t.isa << "\n" << ir_text;
  }
  expect_artifact_matches(sch.func(), func, random_inputs(dag, 13), "padded_features");
}

// In the partial tile of a matrix product's padded columns, A[i, k] is one element for
// every lane: a scalar load (from a constant when no lane is on), not a masked gather of
// one address, which LLVM expands into a branch per lane where gathers are slow (on
// AVX2 the partial tile of a 1001-channel convolution ran ~10x slower than a full one).
TEST(CodegenX86Padded, ALoadEveryLaneSharesIsNotAGather) {
  ops::Workload w = ops::Workload::single("matmul", {{{37, 48}, ir::DType::kFloat32}, {{48, 67}, ir::DType::kFloat32}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "matmul_padded");
  ir::Schedule sch(func);
  std::vector<ir::LoopRV> l = sch.get_loops(sch.get_block("matmul"));  // i j | k
  std::vector<ir::ExprRV> tiles = sch.sample_tile(l[1], 2, 16, 16, std::vector<int64_t>{-1, 16});
  std::vector<ir::LoopRV> j = sch.split(l[1], {ir::Factor(tiles[0]), ir::Factor(tiles[1])});
  sch.reorder({j[0], l[0], l[2], j[1]});
  sch.vectorize(j[1]);
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    EXPECT_NE(ir_text.find("masked.load"), std::string::npos) << t.isa << "\n" << ir_text;
    EXPECT_EQ(ir_text.find("masked.gather"), std::string::npos) << t.isa << "\n" << ir_text;
  }
  expect_artifact_matches(sch.func(), func, random_inputs(dag, 17), "padded_shared_load");
}

// Rows of a padded 7x7 depthwise convolution's input, 9 lanes wide, are masked loads
// (the padding lanes are off). On AVX2, LLVM 16 miscompiled such a non-power-of-two
// masked load inside this nest; code generation now widens it itself.
TEST(CodegenX86Strided, NineLaneMaskedPaddingRowsAreRight) {
  ops::Workload w =
      ops::Workload::single("conv2d", {{{1, 5, 7, 7}, ir::DType::kFloat32}, {{5, 1, 3, 3}, ir::DType::kFloat32}},
                            {{"groups", 5}, {"pads", {1, 1, 1, 1}}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "dw");
  ir::Schedule sch(func);
  ir::BlockRV conv = sch.get_block("conv2d");
  std::vector<ir::LoopRV> l = sch.get_loops(conv);  // n c oh ow | ry rx
  sch.reorder({l[2], l[0], l[1]});
  ir::BlockRV pad = sch.get_block("pad");
  sch.compute_at(pad, l[2]);
  sch.vectorize(sch.get_loops(pad).back());  // 9 lanes
  sch.annotate(l[2], "pragma_auto_unroll_max_step", 64);
  sch.parallel(l[2]);
  std::vector<HostTensor> inputs = random_inputs(dag, 11, 0.1, 2.0);
  for (const char *cpu : {"native", "haswell"})
    expect_artifact_matches(sch.func(), func, inputs, std::string("nine_lanes_") + cpu,
                            Target::parse(std::string("llvm -mcpu=") + cpu + " -num-cores=2"));
}

// A padded 3x3 convolution vectorized along its 7-wide output rows reads its input with
// masked 7-lane loads, widened to 8 by code generation. The widened load must keep the
// input's alias scopes, or LLVM cannot keep the accumulator row in registers across the
// reduction (it stored and reloaded it every step: 3x slower).
TEST(CodegenX86Strided, WidenedMaskedLoadsKeepTheirAliasScopes) {
  ops::Workload w = ops::Workload::single(
      "conv2d", {{{1, 8, 7, 7}, ir::DType::kFloat32}, {{4, 8, 3, 3}, ir::DType::kFloat32}}, {{"pads", {1, 1, 1, 1}}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "conv_rows");
  ir::Schedule sch(func);
  sch.compute_inline(sch.get_block("pad"));
  std::vector<ir::LoopRV> l = sch.get_loops(sch.get_block("conv2d"));  // n k oh ow | c ry rx
  ASSERT_EQ(l.size(), 7u);
  sch.reorder({l[4], l[5], l[6], l[3]});
  sch.vectorize(l[3]);
  sch.parallel(l[1]);  // the nest becomes a task function, which nothing inlines
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    size_t masked_loads = 0;
    std::istringstream lines(ir_text);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("@llvm.masked.load") == std::string::npos || line.find("declare") != std::string::npos) continue;
      ++masked_loads;
      EXPECT_NE(line.find("!alias.scope"), std::string::npos) << t.isa << ": " << line;
    }
    EXPECT_GT(masked_loads, 0u) << t.isa << "\n" << ir_text;
  }

  expect_artifact_matches(sch.func(), func, random_inputs(dag, 7), "conv_rows");
}

// A 3x3 convolution (8 -> 64 channels, 8x8 image) with the register-tiled schedule of
// the fixture, whose accumulator loop LLVM 16's interleaved access groups reordered.
ScheduledConv register_tiled_accumulator_conv() {
  ops::Workload w = ops::Workload::single(
      "conv2d",
      {{{1, 8, 8, 8}, ir::DType::kFloat32}, {{64, 8, 3, 3}, ir::DType::kFloat32}, {{64}, ir::DType::kFloat32}},
      {{"pads", {1, 1, 1, 1}}});
  te::ComputeDAG dag = w.build_dag();
  ir::PrimFunc func = te::lower(dag, "conv_accumulators");
  std::ifstream in(std::string(KILN_CODEGEN_FIXTURES) + "/interleaved_accumulators.trace.json");
  if (!in) throw std::runtime_error(std::string("missing fixture under ") + KILN_CODEGEN_FIXTURES);
  ir::Schedule sch = ir::Schedule::replay(func, ir::Trace::from_json(nlohmann::json::parse(in)));
  return {std::move(dag), std::move(func), std::move(sch)};
}

// A sampled conv2d schedule (found by tuning, shrunk to 8x8 images) whose register tile
// keeps 2 rows x 32 channels of accumulators in a loop Kiln leaves scalar. LLVM 16's loop
// vectorizer grouped the tile's repeated loads and stores of one accumulator into
// interleaved accesses and reordered them (relative error 0.48); its cost model does so
// only for AVX-512. Code generation turns interleaved groups off for every target.
TEST(CodegenX86Vectorizer, RepeatedAccumulatorUpdatesAreNotInterleaved) {
  ScheduledConv c = register_tiled_accumulator_conv();
  const te::ComputeDAG &dag = c.dag;
  const ir::PrimFunc &func = c.func;
  const ir::Schedule &sch = c.sch;
  // Built first: linking (lld, in process) resets LLVM's options, and the option that
  // turns interleaved groups off must hold for every compilation after a link too.
  std::vector<HostTensor> inputs = random_inputs(dag, 13);
  expect_artifact_matches(sch.func(), func, inputs, "accumulators_native");
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    // LLVM names an interleaved group's wide load "wide.vec" and its lanes "strided.vec".
    EXPECT_EQ(ir_text.find("strided.vec"), std::string::npos) << t.isa << "\n" << ir_text;
    EXPECT_EQ(ir_text.find("wide.vec"), std::string::npos) << t.isa << "\n" << ir_text;
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    expect_artifact_matches(sch.func(), func, inputs, "accumulators_avx512",
                            Target::parse("llvm -mcpu=skylake-avx512 -num-cores=2"));
}
// A dense layer whose reduction Kiln unrolls (2 x 64 under each output column, below a
// serial column loop): the column loop's body is 128 statements, past what LLVM's loop
// vectorizer and loop load elimination analyse cheaply, so the vectorizer is kept off
// it. An unscheduled element-wise loop keeps LLVM's vectorizer.
TEST(CodegenX86Vectorizer, LoopsWithLargeUnrolledBodiesAreKeptFromTheVectorizer) {
  ops::Workload dense =
      ops::Workload::single("dense", {{{4, 128}, ir::DType::kFloat32}, {{16, 128}, ir::DType::kFloat32}});
  te::ComputeDAG dag = dense.build_dag();
  ir::PrimFunc func = te::lower(dag, "dense_unrolled");
  ir::Schedule sch(func);
  std::vector<ir::LoopRV> loops = sch.get_loops(sch.get_block("dense"));
  ASSERT_EQ(loops.size(), 3u);
  sch.split(loops[2], {int64_t{2}, int64_t{64}});
  sch.annotate(loops[0], ir::annotation::kAutoUnrollMaxStep, 256);
  const std::string kept_off = "!{!\"llvm.loop.vectorize.enable\", i1 false}";

  ops::Workload add = ops::Workload::single("add", {{{4096}, ir::DType::kFloat32}, {{4096}, ir::DType::kFloat32}});
  ir::PrimFunc elementwise = te::lower(add.build_dag(), "add_scalar");
  for (const IsaTarget &t : x86_isa_targets()) {
    std::string ir_text = compiler().emit_llvm_ir(sch.func(), t.target);
    EXPECT_NE(ir_text.find(kept_off), std::string::npos) << t.isa << "\n" << ir_text;
    std::string add_text = compiler().emit_llvm_ir(elementwise, t.target);
    EXPECT_EQ(add_text.find(kept_off), std::string::npos) << t.isa << "\n" << add_text;
    EXPECT_NE(add_text.find("fadd <"), std::string::npos) << t.isa << ": LLVM no longer vectorizes\n" << add_text;
  }
  expect_artifact_matches(sch.func(), func, random_inputs(dag, 21), "dense_unrolled");
}

// A 256^3 matrix product with its three loops unrolled is 16.8 million statements:
// refused at once, naming the loops, by every entry that lowers (LLVM worked on it until
// the build timeout). A pragma that would copy out too many serial loops is refused
// alike; one within the bound still builds and computes the product.
TEST(CodegenX86Errors, UnrollingPastTheBoundIsRefusedNamingTheLoops) {
  ops::Workload w =
      ops::Workload::single("matmul", {{{256, 256}, ir::DType::kFloat32}, {{256, 256}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  ir::Schedule all(func);
  for (const ir::LoopRV &l : all.get_loops(all.get_block("matmul"))) all.unroll(l);
  auto refusal = [](const std::function<void()> &lower) {
    try {
      lower();
    } catch (const CodegenError &e) {
      return std::string(e.what());
    }
    return std::string("<built>");
  };
  std::string why = refusal([&] { compiler().build_artifact(all.func(), host_target(), temp_dir() + "/unrolled.so"); });
  EXPECT_NE(why.find("unrolling loops i (256), j (256), rk (256) of 'matmul'"), std::string::npos) << why;
  EXPECT_NE(why.find("at most 65536"), std::string::npos) << why;
  EXPECT_FALSE(std::filesystem::exists(temp_dir() + "/unrolled.so"));
  EXPECT_EQ(refusal([&] { compiler().emit_llvm_ir(all.func(), host_target()); }), why);
  EXPECT_EQ(refusal([&] { compiler().emit_assembly(all.func(), host_target()); }), why);

  // Serial loops of at most 64 iterations that a pragma covers are unrolled too.
  ops::Workload small =
      ops::Workload::single("matmul", {{{64, 64}, ir::DType::kFloat32}, {{64, 64}, ir::DType::kFloat32}});
  ir::PrimFunc small_func = te::lower(small.build_dag(), "matmul_pragma");
  ir::Schedule pragma(small_func);
  std::vector<ir::LoopRV> loops = pragma.get_loops(pragma.get_block("matmul"));
  pragma.annotate(loops[0], ir::annotation::kAutoUnrollMaxStep, 1 << 20);
  why = refusal([&] { compiler().emit_llvm_ir(pragma.func(), host_target()); });
  EXPECT_NE(why.find("unrolling loops i (64), j (64), rk (64) of 'matmul_pragma'"), std::string::npos) << why;

  // The innermost two loops of a 16^3 product: 256 statements per row, within the bound.
  ops::Workload fits =
      ops::Workload::single("matmul", {{{16, 16}, ir::DType::kFloat32}, {{16, 16}, ir::DType::kFloat32}});
  te::ComputeDAG dag = fits.build_dag();
  ir::PrimFunc fits_func = te::lower(dag, "matmul_fits");
  ir::Schedule some(fits_func);
  std::vector<ir::LoopRV> fit_loops = some.get_loops(some.get_block("matmul"));
  some.unroll(fit_loops[1]);
  some.unroll(fit_loops[2]);
  expect_artifact_matches(some.func(), fits_func, random_inputs(dag, 5), "matmul_fits");
}

// Linking runs lld in this process, and lld resets LLVM's options to their defaults:
// code generated after a link must be the code generated before it.
TEST(CodegenX86Targets, CodeAfterALinkIsTheCodeBeforeIt) {
  ScheduledConv c = register_tiled_accumulator_conv();
  const ir::Schedule &sch = c.sch;
  Compiler fresh;
  std::vector<std::string> before;
  for (const IsaTarget &t : x86_isa_targets()) before.push_back(fresh.emit_assembly(sch.func(), t.target));
  fresh.build_artifact(sch.func(), host_target(), temp_dir() + "/link_order.so");
  size_t i = 0;
  for (const IsaTarget &t : x86_isa_targets())
    EXPECT_EQ(fresh.emit_assembly(sch.func(), t.target), before[i++]) << t.isa;
}

// `native` resolves (without LLVM) to a CPU name that LLVM builds for; a CPU LLVM does
// not know is a clear error, not a warning followed by generic code or an abort.
TEST(CodegenX86Targets, HostCpuIsKnownToLlvmAndUnknownCpusAreRefused) {
  ops::Workload w = ops::Workload::single("relu", {{{16}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "relu");
  EXPECT_NO_THROW(compiler().emit_assembly(func, Target::parse("llvm -num-cores=2"))) << host_cpu();
  for (const char *isa_level : {"x86-64-v3", "x86-64-v4"})
    EXPECT_NO_THROW(compiler().emit_assembly(
        func, Target::parse(std::string("llvm -mtriple=x86_64-linux-gnu -mcpu=") + isa_level)));
  try {
    compiler().emit_assembly(func, Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=garbage"));
    FAIL() << "an unknown CPU was accepted";
  } catch (const CodegenError &e) {
    EXPECT_NE(std::string(e.what()).find("does not know the CPU 'garbage'"), std::string::npos) << e.what();
  }
}

// The host's code is scheduled for a real core: where LLVM's own host detection does not
// know the CPU (it answers "generic", as LLVM 16 does on AMD's Zen 5), Kiln's name for
// it is used, and an explicit -mcpu is what LLVM builds for. A CPU newer than LLVM 16
// keeps its own name in the target (its records are its own) and is built as the
// newest of its family that LLVM knows.
TEST(CodegenX86Targets, HostCodeIsScheduledForANamedCpu) {
  if (host_cpu() != "generic") {
    EXPECT_EQ(compiler().llvm_cpu(host_target()).find("generic"), std::string::npos);
  }
  EXPECT_EQ(compiler().llvm_cpu(Target::parse("llvm -mcpu=znver3 -mtriple=x86_64-linux-gnu")), "znver3");
  EXPECT_EQ(compiler().llvm_cpu(Target::parse("llvm -mcpu=generic -mtriple=x86_64-linux-gnu")), "generic");
  Target zen5 = Target::parse("llvm -mcpu=znver5 -mtriple=x86_64-linux-gnu -num-cores=2");
  EXPECT_EQ(zen5.vector_width_bits, 512);
  EXPECT_NE(zen5.str(), Target::parse("llvm -mcpu=znver4 -mtriple=x86_64-linux-gnu -num-cores=2").str());
  EXPECT_EQ(compiler().llvm_cpu(zen5), "znver4");
  ops::Workload w = ops::Workload::single("relu", {{{64}, ir::DType::kFloat32}});
  std::string assembly = compiler().emit_assembly(te::lower(w.build_dag(), "relu"), zen5);
  EXPECT_NE(assembly.find("zmm"), std::string::npos) << assembly;
}

// float32 exp, tanh, sigmoid and GELU's erf are polynomials in the vector registers
// (codegen/vector_math.h), scalar and vectorized alike. Checked element by element
// against double-precision libm over their whole useful range, the tiny values, the
// saturated tails, infinities and NaN; exp gives exactly 0 where the true value is a
// denormal. Vectorized, for the host and for AVX2 and AVX-512 (where the host runs it).
TEST(CodegenX86Math, TranscendentalsMatchLibmElementwise) {
  struct Case {
    const char *op;
    double lo, hi;
    std::function<double(double)> want;
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Case> cases = {
      {"exp", -110, 95, [](double x) { return std::exp(x); }},
      {"tanh", -12, 12, [](double x) { return std::tanh(x); }},
      {"sigmoid", -110, 110, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"gelu", -12, 12, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
  };
  for (const Case &c : cases) {
    ops::Workload w = ops::Workload::single(c.op, {{{64, 64}, ir::DType::kFloat32}});
    ir::PrimFunc func = te::lower(w.build_dag(), c.op);
    HostTensor x(ir::DType::kFloat32, {64, 64});
    std::vector<double> special = {0.0,   -0.0, 1e-30, -1e-30, 1e-7, -3e-4, 0.5, 0.55,
                                   -0.55, 1.0,  -1.0,  4.0,    inf,  -inf,  nan};
    for (int64_t i = 0; i < x.size(); ++i)
      x.set(i, i < static_cast<int64_t>(special.size())
                   ? special[static_cast<size_t>(i)]
                   : c.lo + (c.hi - c.lo) * static_cast<double>(i) / static_cast<double>(x.size()));
    for (bool vectorized : {false, true}) {
      ir::Schedule sch(func);
      if (vectorized) {
        std::vector<ir::LoopRV> l = sch.get_loops(sch.get_block(c.op));
        sch.vectorize(sch.split(l.back(), {int64_t{-1}, int64_t{8}}).back());
      }
      // The vector forms for each x86 ISA this host runs (AVX2 everywhere, AVX-512 where
      // present) besides the host's own.
      std::vector<std::pair<std::string, Target>> builds = {{"host", host_target()}};
      if (vectorized)
        for (const IsaTarget &t : x86_isa_targets())
          if (t.isa == "AVX2" || __builtin_cpu_supports("avx512f")) builds.emplace_back(t.isa, t.target);
      for (const auto &[isa, target] : builds) {
        std::string path = temp_dir() + "/math_" + c.op + (vectorized ? "_vec_" + isa : "") + ".so";
        compiler().build_artifact(sch.func(), target, path);
        HostTensor got = run_artifact(path, sch.func(), {x})[0];
        for (int64_t i = 0; i < x.size(); ++i) {
          double in = x.get(i), want = c.want(in), out = got.get(i);
          std::string where =
              std::string(c.op) + (vectorized ? " (vectorized, " + isa + ")" : "") + " at x = " + std::to_string(in);
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(out)) << where << ": " << out;
          } else if (c.op == std::string("exp") && in < -87.34) {
            // No denormal results: each costs a microcode assist when produced or read.
            EXPECT_EQ(out, 0.0) << where;
          } else if (std::isinf(static_cast<float>(want))) {  // past the float range
            EXPECT_EQ(out, static_cast<float>(want)) << where;
          } else {
            // GELU inherits erf's absolute error (1.1e-7) scaled by |x| / 2. Below the
            // normal float range only absolute accuracy is asked for (sigmoid of -101 is
            // 1 / (1 + inf) = 0, the true value a denormal).
            double allowed = 4e-7 * std::fabs(want) + std::numeric_limits<float>::min();
            if (c.op == std::string("gelu")) allowed += 1e-7 * std::fabs(in);
            EXPECT_LE(std::fabs(out - want), allowed) << where << ": got " << out << ", want " << want;
          }
        }
      }
    }
  }
}

// NaN stays NaN through relu, clip, and two-input max and min from either input (ONNX
// Runtime agrees), and infinities clip to the bounds: in the interpreter and in the
// code, scalar and vector (x86's max and min return their second operand when either is
// NaN). The second input of maximum and minimum is the first reversed.
TEST(CodegenX86Math, NaNAndInfinitiesPassThroughReluClipMaxAndMin) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    const char *op;
    nlohmann::json attrs;
    std::function<double(double, double)> want;  // of x and, for two inputs, y
    bool two_inputs = false;
  };
  auto nan_or = [](double x, double y, double otherwise) { return std::isnan(x) ? x : std::isnan(y) ? y : otherwise; };
  std::vector<Case> cases = {
      {"relu", nlohmann::json::object(), [](double x, double) { return std::isnan(x) ? x : std::max(x, 0.0); }},
      {"clip",
       {{"min", -1.0}, {"max", 2.0}},
       [](double x, double) { return std::isnan(x) ? x : std::min(std::max(x, -1.0), 2.0); }},
      {"maximum", nlohmann::json::object(), [&](double x, double y) { return nan_or(x, y, std::max(x, y)); }, true},
      {"minimum", nlohmann::json::object(), [&](double x, double y) { return nan_or(x, y, std::min(x, y)); }, true}};
  for (const Case &c : cases) {
    std::vector<ir::TensorType> types(c.two_inputs ? 2 : 1, ir::TensorType{{4, 16}, ir::DType::kFloat32});
    ops::Workload w = ops::Workload::single(c.op, types, c.attrs);
    ir::PrimFunc func = te::lower(w.build_dag(), c.op);
    HostTensor x(ir::DType::kFloat32, {4, 16}), y(ir::DType::kFloat32, {4, 16});
    const std::vector<double> special = {nan, -nan, inf, -inf, 0.0, -0.0, 0.5, -0.5, 3.0, -3.0, 1.0};
    for (int64_t i = 0; i < x.size(); ++i) {
      x.set(i, special[static_cast<size_t>(i) % special.size()]);
      y.set(i, special[special.size() - 1 - static_cast<size_t>(i) % special.size()]);
    }
    std::vector<HostTensor> inputs = {x};
    if (c.two_inputs) inputs.push_back(y);
    for (bool vectorized : {false, true}) {
      ir::Schedule sch(func);
      if (vectorized) {
        std::vector<ir::LoopRV> l = sch.get_loops(sch.get_block(c.op));
        sch.vectorize(sch.split(l.back(), {int64_t{-1}, int64_t{8}}).back());
      }
      std::string path = temp_dir() + "/nan_" + c.op + (vectorized ? "_vec" : "") + ".so";
      compiler().build_artifact(sch.func(), host_target(), path);
      HostTensor got = run_artifact(path, sch.func(), inputs)[0];
      HostTensor interpreted = ir::interpret(func, inputs)[0];
      for (int64_t i = 0; i < x.size(); ++i) {
        double want = c.want(x.get(i), y.get(i));
        std::string where = std::string(c.op) + (vectorized ? " (vectorized)" : "") +
                            " at x = " + std::to_string(x.get(i)) +
                            (c.two_inputs ? ", y = " + std::to_string(y.get(i)) : "");
        for (double out : {got.get(i), interpreted.get(i)}) {
          if (std::isnan(want))
            EXPECT_TRUE(std::isnan(out)) << where << ": " << out;
          else
            EXPECT_EQ(out, want) << where;
        }
      }
    }
  }
}

// A workspace that cannot be allocated makes the kernel return KILN_ERR_OUT_OF_MEMORY
// instead of writing through a null pointer, from the entry function and from a
// parallel task alike. A forked child limits its address space so that the 1 GiB
// scratch buffer fails; the parent runs the same artifact unlimited.
TEST(CodegenX86Errors, FailedWorkspaceAllocationIsReturned) {
  for (ir::ForKind kind : {ir::ForKind::kSerial, ir::ForKind::kParallel}) {
    ir::Buffer x = ir::make_buffer("x", ir::DType::kFloat32, {2});
    ir::Buffer y = ir::make_buffer("y", ir::DType::kFloat32, {2});
    ir::Buffer scratch = ir::make_buffer("scratch", ir::DType::kFloat32, {int64_t{1} << 28});
    ir::Var i("i"), vi("vi");
    ir::Stmt work =
        ir::make_block("work", {ir::IterVar{vi, 2, ir::IterKind::kSpatial}}, {i}, ir::Expr(), ir::Stmt(),
                       ir::make_seq({ir::make_store(scratch, {ir::make_int(0)}, ir::make_load(x, {vi})),
                                     ir::make_store(y, {vi},
                                                    ir::make_mul(ir::make_load(scratch, {ir::make_int(0)}),
                                                                 ir::make_float(2.0, ir::DType::kFloat32)))}),
                       {scratch});
    ir::PrimFunc func{
        "scratch", {x, y}, ir::make_block("root", {}, {}, ir::Expr(), ir::Stmt(), ir::make_for(i, 2, kind, work))};
    std::string path = temp_dir() + "/scratch_" + std::to_string(static_cast<int>(kind)) + ".so";
    compiler().build_artifact(func, host_target(), path);

    HostTensor in(ir::DType::kFloat32, {2});
    in.set(0, 1.5);
    in.set(1, -4.0);
    HostTensor out = run_artifact(path, func, {in})[0];
    EXPECT_EQ(out.get(0), 3.0);
    EXPECT_EQ(out.get(1), -8.0);

    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      long pages = 0;
      std::ifstream("/proc/self/statm") >> pages;
      rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{256} << 20);
      struct rlimit rl {
        limit, limit
      };
      if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(101);
      void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) _exit(102);
      auto entry = reinterpret_cast<kiln_entry_fn>(dlsym(handle, KILN_ENTRY_SYMBOL));
      alignas(64) float x_data[16] = {1, 2};
      alignas(64) float y_data[16] = {};
      void *args[2] = {x_data, y_data};
      _exit(entry(args) == KILN_ERR_OUT_OF_MEMORY ? 0 : 103);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the kernel crashed (signal " << WTERMSIG(status) << ")";
    EXPECT_EQ(WEXITSTATUS(status), 0) << (kind == ir::ForKind::kParallel ? "parallel" : "serial") << " loop";
  }
}

}  // namespace
}  // namespace kiln::codegen
