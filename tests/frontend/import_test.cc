// ONNX import: real exported models evaluate to PyTorch's outputs; hand-built models
// check each importer's semantics and every class of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "frontend/fusion.h"
#include "frontend/onnx_import.h"
#include "frontend/passes.h"
#include "frontend/reference.h"
#include "frontend/tasks.h"
#include "tests/frontend/model_builder.h"

namespace kiln::frontend {
namespace {

std::string models_dir() { return KILN_FRONTEND_MODELS; }

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ir::HostTensor read_floats(const std::string &path, std::vector<int64_t> shape) {
  std::string bytes = read_file(path);
  ir::HostTensor t(ir::DType::kFloat32, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), t.size() * 4) << path;
  std::memcpy(t.data(), bytes.data(), std::min<size_t>(bytes.size(), static_cast<size_t>(t.size()) * 4));
  return t;
}

// The exported models (PyTorch, random weights) evaluate, node by node in the
// interpreter, to PyTorch's own outputs.
class FixtureModel : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureModel, EvaluatesToTheExportersOutput) {
  const std::string base = models_dir() + "/" + GetParam();
  Graph g = import_onnx_file(base + ".onnx");
  ASSERT_EQ(g.inputs.size(), 1u);
  ASSERT_EQ(g.outputs.size(), 1u);
  ir::HostTensor input = read_floats(base + ".input.bin", g.values[static_cast<size_t>(g.inputs[0])].type.shape);
  ir::HostTensor imported = evaluate_reference(g, {input}).at(0);
  ir::HostTensor want = read_floats(base + ".ref.bin", imported.shape());
  auto expect_matches = [&](const ir::HostTensor &got, const std::string &stage) {
    double max_abs = 0;
    for (int64_t i = 0; i < got.size(); ++i) max_abs = std::max(max_abs, std::fabs(got.get(i) - want.get(i)));
    EXPECT_LE(ir::relative_l2_error(got, want), 1e-4) << stage << ": max abs error " << max_abs;
  };
  expect_matches(imported, "as imported");
  // After the passes, and subgraph by subgraph as a compiled model runs.
  run_default_passes(g);
  expect_matches(evaluate_reference(g, {input}).at(0), "after the passes");
  std::vector<Subgraph> subgraphs = fuse(g);
  expect_matches(evaluate_subgraphs(g, subgraphs, {input}).at(0), "fused");
  EXPECT_FALSE(extract_tasks(subgraphs).empty());
  // With the images in NHWC: the same outputs, node by node and fused.
  Graph nhwc = g;
  if (convert_images_to_nhwc(nhwc) == 0) return;
  expect_matches(evaluate_reference(nhwc, {input}).at(0), "in NHWC");
  expect_matches(evaluate_subgraphs(nhwc, fuse(nhwc), {input}).at(0), "in NHWC, fused");
  // With the 3x3 convolutions as Winograd transforms and matrix products.
  Graph winograd = nhwc;
  if (rewrite_winograd_convolutions(winograd) == 0) return;
  expect_matches(evaluate_reference(winograd, {input}).at(0), "with Winograd convolutions");
  expect_matches(evaluate_subgraphs(winograd, fuse(winograd), {input}).at(0), "with Winograd convolutions, fused");
}

// What the passes and fusion make of the exports: LayerNorm and GELU chains become one
// operator each (the opset-13 graph then equals the opset-17 one), Q/K/V's shared
// reshape is one node, and epilogues ride with their anchors.
TEST(FixtureGraphs, PassesAndFusionShapeTheTasks) {
  auto count = [](const Graph &g, const std::string &op) {
    return std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node &n) { return n.op == op; });
  };
  Graph bert13 = import_onnx_file(models_dir() + "/bert_tiny.onnx");
  Graph bert17 = import_onnx_file(models_dir() + "/bert_tiny_opset17.onnx");
  EXPECT_EQ(count(bert13, "layer_norm"), 0);
  run_default_passes(bert13);
  run_default_passes(bert17);
  EXPECT_EQ(count(bert13, "layer_norm"), 4);
  EXPECT_EQ(count(bert13, "gelu"), 2);
  EXPECT_EQ(count(bert13, "erf"), 0);
  EXPECT_EQ(count(bert13, "reduce_mean"), 0);
  EXPECT_EQ(bert13.nodes.size(), bert17.nodes.size()) << bert13.to_string() << "\n" << bert17.to_string();
  std::vector<Task> bert_tasks = extract_tasks(fuse(bert13));
  EXPECT_EQ(bert_tasks.size(), extract_tasks(fuse(bert17)).size());
  // Q's transpose is read through its permutation by the scores' product (which takes
  // the scale too), V's by the context's product, which stores the context transposed;
  // Kᵀ, which moves the innermost axis, stays a copy of its own; the residual adds join
  // the output projections.
  std::map<std::string, int> groups;
  for (const Subgraph &s : fuse(bert13)) {
    std::string ops;
    for (size_t k : s.nodes) ops += (ops.empty() ? "" : "+") + bert13.nodes[k].op;
    ++groups[ops];
  }
  EXPECT_EQ(groups["transpose"], 2);
  EXPECT_EQ(groups["transpose+batch_matmul+mul"], 2);
  EXPECT_EQ(groups["transpose+batch_matmul+transpose"], 2);
  EXPECT_EQ(groups["matmul+add+add"], 4);
  EXPECT_EQ(groups["add"], 0);

  Graph cnn = import_onnx_file(models_dir() + "/tiny_cnn.onnx");
  run_default_passes(cnn);
  std::vector<Subgraph> subgraphs = fuse(cnn);
  std::vector<std::string> summaries;
  for (const Subgraph &s : subgraphs)
    summaries.push_back(s.workload.summary().substr(0, s.workload.summary().find(' ')));
  EXPECT_EQ(summaries, (std::vector<std::string>{"conv2d+relu", "conv2d+relu", "avg_pool2d", "flatten", "dense"}));

  // In NHWC: one transpose in, the convolutions and the pool channels-last with their
  // activations fused as before, one transpose out before the flatten (it moves the
  // channels, the innermost axis, so it is not folded into the pool's stores).
  EXPECT_EQ(convert_images_to_nhwc(cnn), 3);
  summaries.clear();
  for (const Subgraph &s : fuse(cnn))
    summaries.push_back(s.workload.summary().substr(0, s.workload.summary().find(' ')));
  EXPECT_EQ(summaries, (std::vector<std::string>{"transpose", "conv2d+relu", "conv2d+relu", "avg_pool2d", "transpose",
                                                 "flatten", "dense"}));
  for (const Node &n : cnn.nodes)
    if (n.op == "conv2d" || n.op == "avg_pool2d") EXPECT_EQ(n.attrs["layout"], "NHWC") << n.source;
}

INSTANTIATE_TEST_SUITE_P(Models, FixtureModel,
                         ::testing::Values("tiny_cnn", "mlp", "bert_tiny", "bert_tiny_opset17", "mobilenet_block",
                                           "odd_cnn", "attention_block", "token_head"));

// ---- hand-built models ----------------------------------------------------------------

ir::HostTensor tensor(std::vector<int64_t> shape, std::vector<double> values) {
  ir::HostTensor t(ir::DType::kFloat32, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

void expect_values(const ir::HostTensor &got, std::vector<int64_t> shape, std::vector<double> want) {
  ASSERT_EQ(got.shape(), shape);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.get(static_cast<int64_t>(i)), want[i], 1e-5) << "element " << i;
}

TEST(OnnxImport, GemmWithTransposesAlphaAndBeta) {
  ModelBuilder m;
  m.input("a", {3, 2});                       // transA: A is K x M
  m.floats("b", {2, 3}, {1, 2, 3, 4, 5, 6});  // K x N
  m.floats("c", {1, 2}, {10, 20});
  auto *n = m.node("Gemm", {"a", "b", "c"}, {"y"});
  ModelBuilder::attr(n, "transA", int64_t{1});
  ModelBuilder::attr(n, "transB", int64_t{1});
  ModelBuilder::attr(n, "alpha", 2.0f);
  ModelBuilder::attr(n, "beta", 0.5f);
  m.output("y");
  // B is N x K with transB: B as given is 2x3, so N = 2, K = 3: y = 2 * A^T B^T + 0.5 c.
  Graph g = m.import();
  ir::HostTensor a = tensor({3, 2}, {1, 0, 0, 1, 1, 1});  // A^T = [[1,0,1],[0,1,1]]
  // A^T B^T: row0 = [1+3, 4+6] = [4, 10], row1 = [2+3, 5+6] = [5, 11]
  expect_values(evaluate_reference(g, {a}).at(0), {2, 2}, {2 * 4 + 5, 2 * 10 + 10, 2 * 5 + 5, 2 * 11 + 10});
}

TEST(OnnxImport, MatMulBroadcastsBatchesAndVectors) {
  ModelBuilder m;
  m.input("x", {2, 1, 2, 3});
  m.floats("w", {3, 2}, {1, 0, 0, 1, 1, 1});
  m.floats("v", {2}, {1, -1});
  m.node("MatMul", {"x", "w"}, {"xw"});  // 2x1x2x2
  m.node("MatMul", {"xw", "v"}, {"y"});  // 2x1x2
  m.output("y");
  Graph g = m.import();
  ir::HostTensor x = tensor({2, 1, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 0, 1, 1, 0, 0});
  // x @ w rows: [1+3, 2+3] = [4,5]; [4+6, 5+6] = [10,11]; [1,1]; [1,0]; then @ [1,-1].
  expect_values(evaluate_reference(g, {x}).at(0), {2, 1, 2}, {-1, -1, 0, 1});
}

// A Reshape fed by Shape -> Gather -> Unsqueeze -> Concat (what exporters emit for
// x.view(x.size(0), -1)) folds away: one reshape node with a constant shape remains.
TEST(OnnxImport, ShapeSubgraphsFoldToConstants) {
  ModelBuilder m;
  m.input("x", {2, 3, 4});
  m.ints("zero", {0});
  m.ints("minus_one", {-1});
  m.node("Shape", {"x"}, {"s"});
  auto *gather = m.node("Gather", {"s", "zero"}, {"n"});
  ModelBuilder::attr(gather, "axis", int64_t{0});
  auto *concat = m.node("Concat", {"n", "minus_one"}, {"shape"});
  ModelBuilder::attr(concat, "axis", int64_t{0});
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.node("Relu", {"y"}, {"z"});
  m.output("z");
  Graph g = m.import();
  ASSERT_EQ(g.nodes.size(), 2u) << g.to_string();
  EXPECT_EQ(g.nodes[0].op, "reshape");
  EXPECT_EQ(g.nodes[0].attrs["shape"], nlohmann::json({2, -1}));
  EXPECT_EQ(g.values[static_cast<size_t>(g.outputs[0])].type.shape, (std::vector<int64_t>{2, 12}));
}

TEST(OnnxImport, PadSqueezeUnsqueezeAndDeadNodes) {
  ModelBuilder m;
  m.input("x", {1, 2});
  m.ints("pads", {0, 1, 0, 2});
  m.ints("axes", {0});
  m.node("Pad", {"x", "pads"}, {"p"});        // 1x5: [0, x0, x1, 0, 0]
  m.node("Squeeze", {"p", "axes"}, {"s"});    // 5
  m.node("Unsqueeze", {"s", "axes"}, {"u"});  // 1x5
  m.node("Neg", {"x"}, {"unused"});
  m.output("u");
  Graph g = m.import();
  for (const Node &n : g.nodes) EXPECT_NE(n.op, "neg") << "a node no output needs survived";
  expect_values(evaluate_reference(g, {tensor({1, 2}, {3, 4})}).at(0), {1, 5}, {0, 3, 4, 0, 0});
}

// x * 0.5 * (1 + erf(x / sqrt(2))) in the three orders exporters write becomes gelu; the
// same chain with another constant stays as it is. Identical nodes merge.
TEST(GraphPasses, GeluIsRecognizedOnlyWhenExactAndDuplicatesMerge) {
  enum Order { kTimesXThenHalf, kHalfXFirst, kHalfThenTimesX };
  auto build = [](float half, Order order) {
    ModelBuilder m;
    m.input("x", {2, 3});
    m.floats("sqrt2", {}, {1.4142135f});
    m.floats("one", {}, {1.0f});
    m.floats("half", {}, {half});
    m.node("Div", {"x", "sqrt2"}, {"d"});
    m.node("Erf", {"d"}, {"e"});
    m.node("Add", {"e", "one"}, {"p"});
    if (order == kHalfXFirst) {
      m.node("Mul", {"x", "half"}, {"xh"});
      m.node("Mul", {"xh", "p"}, {"y"});
    } else if (order == kTimesXThenHalf) {
      m.node("Mul", {"x", "p"}, {"xp"});
      m.node("Mul", {"xp", "half"}, {"y"});
    } else {  // torch.export-based exporter
      m.node("Mul", {"half", "p"}, {"ph"});
      m.node("Mul", {"x", "ph"}, {"y"});
    }
    m.node("Relu", {"y"}, {"r1"});
    m.node("Relu", {"y"}, {"r2"});
    m.node("Add", {"r1", "r2"}, {"z"});
    m.output("z");
    return m.import();
  };
  ir::HostTensor x = tensor({2, 3}, {-2, -0.5, 0, 0.3, 1, 3});
  for (Order order : {kTimesXThenHalf, kHalfXFirst, kHalfThenTimesX}) {
    Graph g = build(0.5f, order);
    ir::HostTensor before = evaluate_reference(g, {x}).at(0);
    EXPECT_EQ(eliminate_common_subexpressions(g), 1);
    EXPECT_EQ(rewrite_gelu(g), 1);
    std::vector<std::string> ops;
    for (const Node &n : g.nodes) ops.push_back(n.op);
    EXPECT_EQ(ops, (std::vector<std::string>{"gelu", "relu", "add"})) << g.to_string();
    EXPECT_LE(ir::relative_l2_error(evaluate_reference(g, {x}).at(0), before), 1e-6);
    Graph other = build(0.6f, order);
    EXPECT_EQ(rewrite_gelu(other), 0) << other.to_string();
  }
}

std::vector<std::string> op_names(const Graph &g) {
  std::vector<std::string> ops;
  for (const Node &n : g.nodes) ops.push_back(n.op);
  return ops;
}

std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

TEST(GraphPasses, BatchNormFoldsIntoConvAndDense) {
  // Conv (with and without bias) -> BatchNormalization -> Relu, and Gemm -> BatchNormalization.
  for (bool conv_bias : {true, false}) {
    ModelBuilder m;
    m.input("x", {1, 2, 5, 5});
    m.floats("w", {3, 2, 3, 3}, ramp(54, -1.0f, 0.037f));
    std::vector<std::string> conv_inputs = {"x", "w"};
    if (conv_bias) {
      m.floats("b", {3}, {0.5f, -0.25f, 1.0f});
      conv_inputs.push_back("b");
    }
    m.floats("scale", {3}, {1.5f, -0.5f, 2.0f});
    m.floats("shift", {3}, {0.1f, 0.2f, -0.3f});
    m.floats("mean", {3}, {0.05f, -0.4f, 0.3f});
    m.floats("var", {3}, {0.9f, 1.7f, 0.2f});
    ModelBuilder::attr(m.node("Conv", conv_inputs, {"c"}), "group", int64_t{1});
    m.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"});
    m.node("Relu", {"n"}, {"y"});
    m.output("y");
    Graph g = m.import();
    ir::HostTensor x(ir::DType::kFloat32, {1, 2, 5, 5});
    for (int64_t i = 0; i < x.size(); ++i) x.set(i, std::sin(0.7 * static_cast<double>(i)));
    ir::HostTensor before = evaluate_reference(g, {x}).at(0);
    EXPECT_EQ(fold_channel_affine(g), 2) << g.to_string();
    EXPECT_EQ(op_names(g), (std::vector<std::string>{"conv2d", "relu"})) << g.to_string();
    EXPECT_LE(ir::relative_l2_error(evaluate_reference(g, {x}).at(0), before), 1e-6);
  }
  ModelBuilder m;
  m.input("x", {2, 4});
  m.floats("w", {3, 4}, ramp(12, 0.5f, -0.1f));
  m.floats("b", {3}, {1, 2, 3});
  m.floats("scale", {3}, {2.0f, 0.5f, -1.0f});
  m.floats("shift", {3}, {0.0f, 1.0f, 2.0f});
  m.floats("mean", {3}, {0.5f, 0.0f, -0.5f});
  m.floats("var", {3}, {1.0f, 4.0f, 0.25f});
  ModelBuilder::attr(m.node("Gemm", {"x", "w", "b"}, {"d"}), "transB", int64_t{1});
  m.node("BatchNormalization", {"d", "scale", "shift", "mean", "var"}, {"y"});
  m.output("y");
  Graph g = m.import();
  ir::HostTensor x = tensor({2, 4}, {1, -2, 0.5, 3, -1, 0, 2, 0.25});
  ir::HostTensor before = evaluate_reference(g, {x}).at(0);
  run_default_passes(g);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"dense"})) << g.to_string();
  EXPECT_LE(ir::relative_l2_error(evaluate_reference(g, {x}).at(0), before), 1e-6);
}

// 3x3 convolutions compute the same through Winograd's transforms: a 21x19 output with
// asymmetric pads as F(4x4,3x3) (its last tiles stick out), a 14x14 one as F(2x2,3x3)
// (4x4 blocks of it would waste too much); the bias moves to the output transform. A
// 7x7 output wastes too much of F(2x2)'s tiles too and stays direct, as do strided
// convolutions.
TEST(GraphPasses, WinogradConvolutionsMatchTheDirectOnes) {
  ModelBuilder m;
  m.input("x", {1, 8, 21, 19});
  m.floats("w", {12, 8, 3, 3}, ramp(12 * 8 * 9, -1.0f, 0.0023f));
  m.floats("b", {12}, ramp(12, 0.5f, -0.1f));
  ModelBuilder::attr(m.node("Conv", {"x", "w", "b"}, {"c"}), "pads", std::vector<int64_t>{1, 0, 1, 2});
  m.node("Relu", {"c"}, {"y"});
  m.output("y");
  m.input("mid", {1, 8, 14, 14});
  ModelBuilder::attr(m.node("Conv", {"mid", "w", "b"}, {"f2"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.output("f2");
  m.input("small", {1, 8, 7, 7});
  ModelBuilder::attr(m.node("Conv", {"small", "w"}, {"s"}), "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.output("s");
  auto *strided = m.node("Conv", {"x", "w"}, {"t"});
  ModelBuilder::attr(strided, "strides", std::vector<int64_t>{2, 2});
  m.output("t");
  Graph g = m.import();
  run_default_passes(g);
  ASSERT_EQ(convert_images_to_nhwc(g), 4);
  std::vector<ir::HostTensor> inputs;
  for (ValueId v : g.inputs) {
    ir::HostTensor t(ir::DType::kFloat32, g.values[static_cast<size_t>(v)].type.shape);
    for (int64_t i = 0; i < t.size(); ++i) t.set(i, std::sin(0.37 * static_cast<double>(i)));
    inputs.push_back(std::move(t));
  }
  std::vector<ir::HostTensor> direct = evaluate_reference(g, inputs);
  ASSERT_EQ(rewrite_winograd_convolutions(g), 2) << g.to_string();
  std::vector<int64_t> output_tiles;
  for (const Node &n : g.nodes)
    if (n.op == "winograd_input_transform") output_tiles.push_back(n.attrs["output_tile"]);
  EXPECT_EQ(output_tiles, (std::vector<int64_t>{4, 2})) << g.to_string();
  auto count = [&](const std::string &op) {
    return std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node &n) { return n.op == op; });
  };
  EXPECT_EQ(count("batch_matmul"), 2);
  EXPECT_EQ(count("winograd_output_transform"), 2);
  EXPECT_EQ(count("conv2d"), 2);
  std::vector<ir::HostTensor> fast = evaluate_reference(g, inputs);
  std::vector<ir::HostTensor> fused = evaluate_subgraphs(g, fuse(g), inputs);
  ASSERT_EQ(fast.size(), direct.size());
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_LE(ir::relative_l2_error(fast[i], direct[i]), 1e-5) << "output " << i;
    EXPECT_LE(ir::relative_l2_error(fused[i], direct[i]), 1e-5) << "output " << i << ", fused";
  }
}

TEST(GraphPasses, ChannelAffineStaysWhenItCannotFold) {
  ModelBuilder m;
  m.input("x", {1, 2, 4, 4});
  m.floats("w", {2, 2, 1, 1}, {1, 2, 3, 4});
  m.floats("per_row", {4, 1}, {1, 2, 3, 4});  // varies along H, not the channels
  m.floats("per_channel", {2, 1, 1}, {2, 3});
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Mul", {"c", "per_row"}, {"rows"});
  m.node("Conv", {"x", "w"}, {"c2"});
  m.node("Mul", {"c2", "per_channel"}, {"scaled"});  // c2 is read twice: it must stay
  m.node("Add", {"scaled", "c2"}, {"twice"});
  m.node("Div", {"per_channel", "rows"}, {"y"});  // a constant divided by the product
  m.node("Add", {"y", "twice"}, {"z"});
  m.output("z");
  Graph g = m.import();
  EXPECT_EQ(fold_channel_affine(g), 0) << g.to_string();
}

// torch.onnx.export writes weights to a data file beside the model by default: they are
// read from there, and a location that leaves the model's folder, a missing file or a
// claim past the file's end is refused naming the tensor.
TEST(OnnxImport, ExternalDataIsReadFromBesideTheModel) {
  const std::string dir = ::testing::TempDir() + "/kiln_external_data";
  std::filesystem::create_directories(dir);
  const float w[2] = {1.5f, -2.0f}, padding = 99.0f;
  {
    std::ofstream data(dir + "/weights.bin", std::ios::binary);
    data.write(reinterpret_cast<const char *>(&padding), sizeof padding);
    data.write(reinterpret_cast<const char *>(w), sizeof w);
  }
  auto model = [&](const std::string &location, const std::string &offset, const std::string &length) {
    ModelBuilder m;
    m.input("x", {2});
    onnx::TensorProto *t = m.floats("w", {2}, {});
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [key, value] : {std::pair{"location", location}, {"offset", offset}, {"length", length}}) {
      if (value.empty()) continue;
      auto *entry = t->add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    }
    m.node("Add", {"x", "w"}, {"y"});
    m.output("y");
    return m;
  };
  auto error_of_file = [&](const ModelBuilder &m) -> std::string {
    const std::string path = dir + "/model.onnx";
    std::ofstream(path, std::ios::binary) << m.model.SerializeAsString();
    try {
      import_onnx_file(path);
    } catch (const ImportError &e) {
      return e.what();
    }
    return "<imported>";
  };

  ModelBuilder good = model("weights.bin", "4", "8");
  std::ofstream(dir + "/model.onnx", std::ios::binary) << good.model.SerializeAsString();
  Graph g = import_onnx_file(dir + "/model.onnx");
  ir::HostTensor x(ir::DType::kFloat32, {2});
  x.set(0, 1.0);
  x.set(1, 1.0);
  ir::HostTensor y = evaluate_reference(g, {x}).at(0);
  EXPECT_EQ(y.get(0), 2.5);
  EXPECT_EQ(y.get(1), -1.0);

  EXPECT_NE(error_of_file(model("../weights.bin", "", "")).find("outside the model's folder"), std::string::npos);
  EXPECT_NE(error_of_file(model("/etc/passwd", "", "")).find("outside the model's folder"), std::string::npos);
  EXPECT_NE(error_of_file(model("missing.bin", "", "")).find("does not exist or is not a file"), std::string::npos);
  EXPECT_NE(error_of_file(model("weights.bin", "8", "8")).find("claims bytes 8 to 16 of"), std::string::npos);
  EXPECT_NE(error_of_file(model("weights.bin", "-4", "")).find("offset '-4', which is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of_file(model("weights.bin", "0", "12")).find("needs 8 bytes but holds 12"), std::string::npos);
  // Bytes in memory have no folder to name files in.
  EXPECT_NE(good.error().find("which only a model read from a file can name"), std::string::npos) << good.error();
}

// A directory given as the model opens as a stream of 2^63 - 1 bytes: it is named as
// what it is instead.
TEST(OnnxImport, ADirectoryIsNotAModelFile) {
  std::string dir = ::testing::TempDir();
  try {
    import_onnx_file(dir);
    ADD_FAILURE() << "a directory imported";
  } catch (const ImportError &e) {
    EXPECT_EQ(std::string(e.what()), "model file '" + dir + "' is a directory; give the path of the .onnx file");
  }
}

TEST(OnnxImport, DynamicDimensionsNeedAShape) {
  ModelBuilder m;
  m.input("x", {-1, 4});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  std::string error = m.error();
  EXPECT_NE(error.find("graph input 'x' has a dynamic dimension 'batch'"), std::string::npos) << error;
  EXPECT_NE(error.find("--dim batch=VALUE (or a range, --dim batch=1..512) or --shape x=DIMS"), std::string::npos)
      << error;
  // A dimension with neither a size nor a name says which one it is.
  ModelBuilder unknown;
  unknown.input("x", {2, 4});
  unknown.graph->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->Clear();
  unknown.node("Relu", {"x"}, {"y"});
  unknown.output("y");
  EXPECT_NE(unknown.error().find("graph input 'x' has a dimension of unknown size (dimension 1); give it with "
                                 "--shape x=DIMS"),
            std::string::npos)
      << unknown.error();
  ImportOptions fixed;
  fixed.input_shapes["x"] = {3, 4};
  Graph g = m.import(fixed);
  EXPECT_EQ(g.values[static_cast<size_t>(g.inputs[0])].type.shape, (std::vector<int64_t>{3, 4}));
  ImportOptions wrong;
  wrong.input_shapes["y"] = {3, 4};
  EXPECT_NE(m.error(wrong).find("--shape names 'y', which is not a graph input; the inputs are: x"), std::string::npos);
}

TEST(OnnxImport, EveryUnsupportedOperatorIsListedOnce) {
  ModelBuilder m;
  m.input("x", {4});
  m.node("FooOp", {"x"}, {"a"});
  m.node("FooOp", {"a"}, {"b"});
  m.node("NonMaxSuppression", {"b"}, {"c"});
  m.node("Relu", {"c"}, {"d"})->set_domain("com.example");
  m.output("d");
  EXPECT_NE(
      m.error().find("uses operators Kiln does not import: FooOp (2), NonMaxSuppression (1), com.example::Relu (1)"),
      std::string::npos)
      << m.error();
}

TEST(OnnxImport, VersionsOutsideTheSupportedRangeAreRefusedFirst) {
  ModelBuilder newer(22);
  newer.input("x", {4});
  newer.node("FooOp", {"x"}, {"y"});
  newer.output("y");
  EXPECT_NE(newer.error().find("uses opset 22; Kiln imports opsets 11 to 21"), std::string::npos) << newer.error();
  ModelBuilder ir11;
  ir11.model.set_ir_version(11);
  EXPECT_NE(ir11.error().find("has ONNX IR version 11; Kiln reads up to 10"), std::string::npos) << ir11.error();
  // What IR 9 and 10 add is refused by name where it is used.
  ModelBuilder ir10(21);
  ir10.model.set_ir_version(10);
  ir10.input("x", {4}, /*INT4=*/22);
  ir10.node("Identity", {"x"}, {"y"});
  ir10.output("y");
  EXPECT_NE(ir10.error().find("graph input 'x' has element type INT4"), std::string::npos) << ir10.error();
}

// Opsets 18 to 21 as current exporters write them: reductions take their axes as an
// input, Split says num_outputs (the last part smaller), Pad pads listed axes.
TEST(OnnxImport, Opset18To21FormsOfReduceSplitAndPad) {
  for (int opset : {18, 21}) {
    ModelBuilder m(opset);
    m.model.set_ir_version(opset == 21 ? 10 : 8);
    m.input("x", {2, 5});
    m.ints("axes", {1});
    auto *mean = m.node("ReduceMean", {"x", "axes"}, {"mean"});
    ModelBuilder::attr(mean, "keepdims", int64_t{0});
    auto *split = m.node("Split", {"x"}, {"a", "b"});
    ModelBuilder::attr(split, "axis", int64_t{1});
    ModelBuilder::attr(split, "num_outputs", int64_t{2});
    m.ints("pads", {1, 0});
    m.ints("pad_axes", {0});
    m.node("Pad", {"b", "pads", "", "pad_axes"}, {"padded"});
    m.output("mean");
    m.output("a");
    m.output("padded");
    Graph g = m.import();
    std::vector<ir::HostTensor> got = evaluate_reference(g, {tensor({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})});
    expect_values(got.at(0), {2}, {3, 8});
    expect_values(got.at(1), {2, 3}, {1, 2, 3, 6, 7, 8});
    expect_values(got.at(2), {3, 2}, {0, 0, 4, 5, 9, 10});
  }
}

// A dynamic export fixed with --shape: Range over a Shape, Equal and Where on constants
// (torch's expand(B, -1, -1) of a class token) fold to constants at import, and the
// embedding lookup of the token ids stays a run-time take.
TEST(OnnxImport, DynamicExportsFoldTheirShapeArithmetic) {
  ModelBuilder m(17);
  m.input("ids", {1, -1}, onnx::TensorProto::INT64);
  m.node("Shape", {"ids"}, {"shape"});
  m.ints("one_index", {1});
  m.node("Gather", {"shape", "one_index"}, {"length1"});
  m.ints("axes0", {0});
  m.node("Squeeze", {"length1", "axes0"}, {"length"});
  m.ints("zero", {0});
  m.ints("step", {1});
  for (int k : {2, 1}) m.graph->mutable_initializer(m.graph->initializer_size() - k)->clear_dims();  // scalars
  m.node("Range", {"zero", "length", "step"}, {"positions1"});
  m.node("Unsqueeze", {"positions1", "axes0"}, {"positions"});
  std::vector<float> table(10 * 2);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  m.floats("word_embeddings", {10, 2}, table);
  m.floats("position_embeddings", {10, 2}, std::vector<float>(20, 100.0f));
  m.node("Gather", {"word_embeddings", "ids"}, {"words"});
  m.node("Gather", {"position_embeddings", "positions"}, {"places"});
  m.node("Add", {"words", "places"}, {"embedded"});
  m.floats("cls", {1, 1, 2}, {-1, -2});
  m.ints("target", {1, -1, -1});
  m.ints("minus_one", {-1});
  m.node("Equal", {"target", "minus_one"}, {"keep"});
  m.ints("ones", {1, 1, 1});
  m.node("Where", {"keep", "ones", "target"}, {"expand_to"});
  m.node("Expand", {"cls", "expand_to"}, {"cls_tokens"});
  auto *concat = m.node("Concat", {"cls_tokens", "embedded"}, {"tokens"});
  ModelBuilder::attr(concat, "axis", int64_t{1});
  m.output("tokens");
  EXPECT_NE(m.error().find("--shape ids=DIMS"), std::string::npos) << m.error();
  ImportOptions fixed;
  fixed.input_shapes["ids"] = {1, 3};
  Graph g = m.import(fixed);
  for (const Node &n : g.nodes) EXPECT_TRUE(n.op == "take" || n.op == "add" || n.op == "concat") << n.op;
  ir::HostTensor ids(ir::DType::kInt64, {1, 3});
  for (int64_t i = 0; i < 3; ++i) ids.set(i, static_cast<double>(7 - 2 * i));
  expect_values(evaluate_reference(g, {ids}).at(0), {1, 4, 2}, {-1, -2, 114, 115, 110, 111, 106, 107});
}

// The activations composed of element-wise operators, at the values where their pieces
// meet and where a naive formula overflows or underflows.
TEST(OnnxImport, ComposedActivationsMatchTheirDefinitions) {
  ModelBuilder m(20);
  m.input("x", {5});
  auto *leaky = m.node("LeakyRelu", {"x"}, {"leaky"});
  ModelBuilder::attr(leaky, "alpha", 0.1f);
  m.node("Elu", {"x"}, {"elu"});
  m.node("Softplus", {"x"}, {"softplus"});
  m.node("LogSoftmax", {"x"}, {"logsoftmax"});
  m.floats("slope", {1}, {0.25f});
  m.node("PRelu", {"x", "slope"}, {"prelu"});
  m.node("Gelu", {"x"}, {"gelu"});
  for (const char *out : {"leaky", "elu", "softplus", "logsoftmax", "prelu", "gelu"}) m.output(out);
  Graph g = m.import();
  std::vector<double> x = {-200, -1, 0, 2, 200};
  std::vector<ir::HostTensor> got = evaluate_reference(g, {tensor({5}, x)});
  expect_values(got.at(0), {5}, {-20, -0.1, 0, 2, 200});
  expect_values(got.at(1), {5}, {-1, std::expm1(-1.0), 0, 2, 200});
  expect_values(got.at(2), {5}, {0, std::log1p(std::exp(-1.0)), std::log(2.0), 2 + std::log1p(std::exp(-2.0)), 200});
  // log(sum(exp(x))) is 200 up to exp(-198): every element minus 200.
  expect_values(got.at(3), {5}, {-400, -201, -200, -198, 0});
  expect_values(got.at(4), {5}, {-50, -0.25, 0, 2, 200});
  expect_values(got.at(5), {5},
                {0, -0.5 * (1 - std::erf(1 / std::sqrt(2.0))), 0, 2 * 0.5 * (1 + std::erf(std::sqrt(2.0))), 200});
}

// Comparisons, Not, Where and a Cast to bool of computed tensors (a mask built at run
// time, as current transformers exports build it) import as Kiln's operators; a Not or
// a Where condition that is not bool is refused naming the node.
TEST(OnnxImport, RunTimeMasksCompareSelectAndCast) {
  ModelBuilder m(18);
  m.input("x", {5});
  m.input("mask", {5}, onnx::TensorProto::INT64);
  m.ints("zero", {0});
  m.floats("fill", {1}, {-100.0f});
  m.floats("half", {1}, {0.5f});
  m.node("Equal", {"mask", "zero"}, {"masked"});
  m.node("Not", {"masked"}, {"kept"});
  m.node("Where", {"masked", "fill", "x"}, {"filled"});
  auto *cast = m.node("Cast", {"mask"}, {"as_bool"});
  ModelBuilder::attr(cast, "to", int64_t{onnx::TensorProto::BOOL});
  auto *back = m.node("Cast", {"kept"}, {"kept_float"});
  ModelBuilder::attr(back, "to", int64_t{onnx::TensorProto::FLOAT});
  m.node("Greater", {"x", "half"}, {"big"});
  m.node("LessOrEqual", {"x", "half"}, {"small"});
  auto *big_float = m.node("Cast", {"big"}, {"big_float"});
  ModelBuilder::attr(big_float, "to", int64_t{onnx::TensorProto::FLOAT});
  auto *small_float = m.node("Cast", {"small"}, {"small_float"});
  ModelBuilder::attr(small_float, "to", int64_t{onnx::TensorProto::FLOAT});
  auto *bool_float = m.node("Cast", {"as_bool"}, {"bool_float"});
  ModelBuilder::attr(bool_float, "to", int64_t{onnx::TensorProto::FLOAT});
  for (const char *out : {"filled", "kept_float", "big_float", "small_float", "bool_float"}) m.output(out);
  Graph g = m.import();
  ir::HostTensor mask(ir::DType::kInt64, {5});
  for (int64_t i = 0; i < 5; ++i) mask.set(i, std::vector<double>{1, 0, 3, 0, -2}[static_cast<size_t>(i)]);
  std::vector<ir::HostTensor> got = evaluate_reference(g, {tensor({5}, {-1, 0.5, 2, 3, 0.75}), mask});
  expect_values(got.at(0), {5}, {-1, -100, 2, -100, 0.75});
  expect_values(got.at(1), {5}, {1, 0, 1, 0, 1});
  expect_values(got.at(2), {5}, {0, 0, 1, 1, 1});
  expect_values(got.at(3), {5}, {1, 1, 0, 0, 0});
  expect_values(got.at(4), {5}, {1, 0, 1, 0, 1});

  ModelBuilder not_bool(18);
  not_bool.input("x", {5});
  not_bool.node("Not", {"x"}, {"y"});
  not_bool.output("y");
  EXPECT_NE(not_bool.error().find("Not needs a bool input"), std::string::npos) << not_bool.error();
  ModelBuilder float_condition(18);
  float_condition.input("x", {5});
  float_condition.node("Where", {"x", "x", "x"}, {"y"});
  float_condition.output("y");
  EXPECT_NE(float_condition.error().find("the condition must be bool"), std::string::npos) << float_condition.error();
}

// Resize imports nearest and bilinear resizes of height and width; what Kiln does not
// compute (cubic, tf_crop_and_resize, a resized channel axis) is refused naming it.
TEST(OnnxImport, ResizeImportsSpatialResizesAndRefusesTheRest) {
  auto model = [](const std::string &mode, const std::string &coordinates, std::vector<float> scales) {
    ModelBuilder m(13);
    m.input("x", {1, 2, 3, 4});
    m.floats("scales", {4}, scales);
    auto *r = m.node("Resize", {"x", "", "scales"}, {"y"});
    auto *a = r->add_attribute();
    a->set_name("mode");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(mode);
    auto *b = r->add_attribute();
    b->set_name("coordinate_transformation_mode");
    b->set_type(onnx::AttributeProto::STRING);
    b->set_s(coordinates);
    m.output("y");
    return m;
  };
  Graph g = model("nearest", "asymmetric", {1, 1, 2, 2}).import();
  ir::HostTensor x(ir::DType::kFloat32, {1, 2, 3, 4});
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, double(i));
  ir::HostTensor y = evaluate_reference(g, {x}).at(0);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{1, 2, 6, 8}));
  // Nearest x2 with asymmetric coordinates (round_prefer_floor): output (r, c) reads
  // input (r / 2, c / 2) rounded, half-way down.
  EXPECT_EQ(y.get(0), 0);
  EXPECT_EQ(y.get(3), 1);                  // c = 3: 1.5 rounds to 1
  EXPECT_EQ(y.get(8 * 3 + 5), 4 * 1 + 2);  // r = 3, c = 5: (1.5, 2.5) -> (1, 2)
  EXPECT_NE(model("cubic", "half_pixel", {1, 1, 2, 2}).error().find("mode 'cubic' is not supported"),
            std::string::npos);
  EXPECT_NE(model("linear", "tf_crop_and_resize", {1, 1, 2, 2}).error().find("'tf_crop_and_resize' is not supported"),
            std::string::npos);
  EXPECT_NE(model("nearest", "asymmetric", {1, 2, 2, 2}).error().find("resizing the batch or channel axis"),
            std::string::npos);
}

// MaxPool with ceil_mode and a partial last window (GoogLeNet's pools): padded with the
// lowest value at the end; a window that would start in the padding is dropped.
TEST(OnnxImport, CeilModePoolsCoverThePartialLastWindow) {
  ModelBuilder m;
  m.input("x", {1, 1, 1, 5});
  auto *pool = m.node("MaxPool", {"x"}, {"y"});
  ModelBuilder::attr(pool, "kernel_shape", std::vector<int64_t>{1, 2});
  ModelBuilder::attr(pool, "strides", std::vector<int64_t>{1, 2});
  ModelBuilder::attr(pool, "ceil_mode", int64_t{1});
  auto *avg = m.node("AveragePool", {"x"}, {"z"});
  ModelBuilder::attr(avg, "kernel_shape", std::vector<int64_t>{1, 2});
  ModelBuilder::attr(avg, "strides", std::vector<int64_t>{1, 2});
  ModelBuilder::attr(avg, "ceil_mode", int64_t{1});
  m.output("y");
  m.output("z");
  Graph g = m.import();
  std::vector<ir::HostTensor> got = evaluate_reference(g, {tensor({1, 1, 1, 5}, {-1, -2, -3, -4, -5})});
  expect_values(got.at(0), {1, 1, 1, 3}, {-1, -3, -5});
  expect_values(got.at(1), {1, 1, 1, 3}, {-1.5, -3.5, -5});
}

TEST(OnnxImport, BadFilesAndTensorsAreClearErrors) {
  std::string bytes = read_file(models_dir() + "/tiny_cnn.onnx");
  for (const std::string &junk :
       {bytes.substr(0, bytes.size() / 2), std::string("hello, not a model"), std::string()}) {
    try {
      import_onnx_bytes(junk);
      ADD_FAILURE() << "junk of " << junk.size() << " bytes imported";
    } catch (const ImportError &e) {
      EXPECT_NE(std::string(e.what()).find("is not an ONNX model"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(import_onnx_file("/nonexistent/model.onnx"), ImportError);

  ModelBuilder huge;
  huge.input("x", {4});
  onnx::TensorProto *w = huge.floats("w", {1 << 20, 1 << 9}, {});
  w->set_raw_data(std::string(4, '\0'));
  huge.node("Add", {"x", "w"}, {"y"});
  huge.output("y");
  EXPECT_NE(huge.error().find("tensor 'w' (1048576x512 float32) needs 2147483648 bytes but holds 4"), std::string::npos)
      << huge.error();
}

TEST(OnnxImport, DanglingInputsCyclesAndShapeMismatchesNameTheNode) {
  ModelBuilder dangling;
  dangling.input("x", {4});
  dangling.node("Add", {"x", "nowhere"}, {"y"});
  dangling.output("y");
  EXPECT_NE(dangling.error().find("node 'Add_1' (Add): input 'nowhere' is not defined before this node"),
            std::string::npos)
      << dangling.error();

  ModelBuilder cycle;
  cycle.input("x", {4});
  cycle.node("Add", {"x", "b"}, {"a"});
  cycle.node("Relu", {"a"}, {"b"});
  cycle.output("b");
  EXPECT_NE(cycle.error().find("(a cycle or a dangling input)"), std::string::npos) << cycle.error();

  ModelBuilder mismatch;
  mismatch.input("x", {2, 3});
  mismatch.floats("w", {4}, {1, 2, 3, 4});
  mismatch.node("Add", {"x", "w"}, {"y"});
  mismatch.output("y");
  std::string error = mismatch.error();
  EXPECT_NE(error.find("node 'Add_1' (Add): "), std::string::npos) << error;
  EXPECT_NE(error.find("broadcast"), std::string::npos) << error;
}

// A chain of element-wise nodes longer than a group may be (an adversarial model: its
// scheduling cost grows with the square of a group's length) is cut into groups of at
// most kMaxFusedNodes, which still compute the chain.
TEST(Fusion, ALongElementwiseChainIsCutIntoBoundedGroups) {
  ModelBuilder m;
  m.input("x0", {2, 3});
  const int length = 2 * kMaxFusedNodes + 37;
  const char *ops[] = {"Relu", "Neg", "Abs"};
  for (int i = 0; i < length; ++i) m.node(ops[i % 3], {"x" + std::to_string(i)}, {"x" + std::to_string(i + 1)});
  m.output("x" + std::to_string(length));
  Graph g = m.import();
  std::vector<Subgraph> subgraphs = fuse(g);
  std::vector<size_t> sizes;
  for (const Subgraph &s : subgraphs) sizes.push_back(s.nodes.size());
  const size_t full = kMaxFusedNodes;
  EXPECT_EQ(sizes, (std::vector<size_t>{full, full, static_cast<size_t>(length) - 2 * full}));
  std::vector<double> values = {-1.5, 0, 2, -3, 4.25, -0.5};
  ir::HostTensor x = tensor({2, 3}, values);
  for (int i = 0; i < length; ++i)
    for (double &v : values) v = i % 3 == 0 ? std::max(v, 0.0) : i % 3 == 1 ? -v : std::fabs(v);
  expect_values(evaluate_subgraphs(g, subgraphs, {x}).at(0), {2, 3}, values);
}

}  // namespace
}  // namespace kiln::frontend
