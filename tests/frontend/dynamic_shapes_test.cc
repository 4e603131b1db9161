// Dynamic dimensions: parsing ranges, placing buckets, finding which axes follow a
// dimension, and the masked bucket graphs, whose leading part is the model imported at
// the actual value, run by the reference interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "frontend/dynamic_shapes.h"
#include "frontend/onnx_import.h"
#include "frontend/pipeline.h"
#include "frontend/reference.h"
#include "support/pieces.h"
#include "tests/frontend/model_builder.h"

namespace kiln::frontend {
namespace {

std::string bert_path() { return std::string(KILN_FRONTEND_MODELS) + "/bert_ids_dynamic.onnx"; }

Graph import_bert(int64_t sequence) {
  ImportOptions options;
  options.dim_values = {{"batch", 1}, {"sequence", sequence}};
  return import_onnx_file(bert_path(), options);
}

ImportAt bert_at() {
  return [](const std::vector<int64_t> &values) { return import_bert(values.at(0)); };
}

// Where element `flat` of a tensor of shape `shape` sits in one of shape `padded` that
// holds it in its leading part (row-major both).
int64_t padded_offset(int64_t flat, const std::vector<int64_t> &shape, const std::vector<int64_t> &padded) {
  int64_t offset = 0, stride = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    offset += (flat % shape[a]) * stride;
    flat /= shape[a];
    stride *= padded[a];
  }
  return offset;
}

// The leading block of `padded` that has the shape `shape`.
ir::HostTensor leading_part(const ir::HostTensor &padded, const std::vector<int64_t> &shape) {
  ir::HostTensor out(padded.dtype(), shape);
  for (int64_t flat = 0; flat < out.size(); ++flat)
    out.set(flat, padded.get(padded_offset(flat, shape, padded.shape())));
  return out;
}

// `real` written into a tensor of shape `padded` filled with ones: the padding is a
// valid token, attended to by the model's own mask, so only Kiln's masks keep it out.
ir::HostTensor padded_to(const ir::HostTensor &real, const std::vector<int64_t> &padded) {
  ir::HostTensor out(real.dtype(), padded);
  out.fill(1);
  for (int64_t flat = 0; flat < real.size(); ++flat) out.set(padded_offset(flat, real.shape(), padded), real.get(flat));
  return out;
}

ir::HostTensor dim_value(double value) {
  ir::HostTensor t(ir::DType::kFloat32, {1});
  t.set(0, value);
  return t;
}

// Runs the bucket graph on `inputs` (of the actual shapes) padded to it, with the
// dimension's value `told` (the actual one unless a test says otherwise), and returns
// the outputs' leading parts, shaped like `want`'s.
std::vector<ir::HostTensor> run_padded(const Graph &bucket, const std::vector<ir::HostTensor> &inputs, double told,
                                       const std::vector<ir::HostTensor> &want) {
  std::vector<ir::HostTensor> padded;
  for (size_t i = 0; i < inputs.size(); ++i)
    padded.push_back(padded_to(inputs[i], bucket.values[static_cast<size_t>(bucket.inputs[i])].type.shape));
  if (bucket.inputs.size() > inputs.size()) padded.push_back(dim_value(told));
  std::vector<ir::HostTensor> out = evaluate_reference(bucket, padded);
  std::vector<ir::HostTensor> leading;
  for (size_t o = 0; o < out.size(); ++o) leading.push_back(leading_part(out[o], want[o].shape()));
  return leading;
}

double worst_error(const std::vector<ir::HostTensor> &got, const std::vector<ir::HostTensor> &want) {
  double worst = 0;
  for (size_t o = 0; o < got.size(); ++o) worst = std::max(worst, ir::relative_l2_error(got[o], want[o]));
  return worst;
}

std::vector<ir::HostTensor> random_token_inputs(const Graph &g, std::mt19937_64 &rng) {
  std::vector<ir::HostTensor> inputs;
  for (ValueId in : g.inputs) {
    const Value &v = g.values[static_cast<size_t>(in)];
    ir::HostTensor t(v.type.dtype, v.type.shape);
    // Ids within every table (types: 0..1); the mask keeps most tokens.
    t.fill_random(rng, 0, v.name == "attention_mask" ? 1 : v.name == "token_type_ids" ? 1 : 20);
    if (v.name == "attention_mask") t.set(0, 1);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

TEST(DynamicShapes, ParsesValuesRangesAndExpectedValues) {
  DimRange fixed = parse_dim_range("batch=4");
  EXPECT_TRUE(fixed.is_fixed());
  EXPECT_EQ(fixed.max, 4);
  DimRange r = parse_dim_range("seq=1..128");
  EXPECT_EQ(r.name, "seq");
  EXPECT_EQ(r.min, 1);
  EXPECT_EQ(r.max, 128);
  EXPECT_DOUBLE_EQ(r.probability(5), 1.0 / 128);
  EXPECT_EQ(r.probability(129), 0);
  DimRange w = parse_dim_range("seq=1..128@8,16,16,128");
  EXPECT_DOUBLE_EQ(w.probability(16), 0.5);
  EXPECT_EQ(w.probability(9), 0);
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "kiln_dim_weights.json";
  std::ofstream(file) << R"({"32": 3, "64": 1})";
  DimRange from_file = parse_dim_range("seq=1..64@" + file.string());
  EXPECT_DOUBLE_EQ(from_file.probability(32), 0.75);
  std::filesystem::remove(file);
  for (const char *bad :
       {"seq", "=4", "seq=0", "seq=5..2", "seq=1..8@9", "seq=4@4", "seq=1..x", "seq=1..8@nofile.json", "seq=-1..4"})
    EXPECT_THROW(parse_dim_range(bad), std::invalid_argument) << bad;
  try {
    parse_dim_range("seq=1..8@9");
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("the expected value 9 is outside 1..8"), std::string::npos) << e.what();
  }
}

// Weights files a user may get wrong: nothing after '@', weights whose sum overflows,
// a file nested far deeper than any document (parsed, but printing it in the error
// overflowed the stack), a long refused value (cut in the message).
TEST(DynamicShapes, RefusesEmptyOverflowingAndDeepWeights) {
  auto error_of = [](const std::string &spec) {
    try {
      parse_dim_range(spec);
    } catch (const std::invalid_argument &e) {
      return std::string(e.what());
    }
    return std::string("<accepted>");
  };
  EXPECT_NE(error_of("seq=1..32@").find("nothing after '@'"), std::string::npos);
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "kiln_dim_weights_bad.json";
  std::ofstream(file) << R"({"8": 1e308, "16": 1e308})";
  EXPECT_NE(error_of("seq=1..32@" + file.string()).find("add up to more than a double holds"), std::string::npos);
  std::ofstream(file) << std::string(100000, '[') << std::string(100000, ']');
  std::string deep = error_of("seq=1..32@" + file.string());
  EXPECT_NE(deep.find("nests deeper than 64 levels"), std::string::npos) << deep.substr(0, 300);
  EXPECT_LT(deep.size(), 1000u);
  std::ofstream(file) << "[\"" << std::string(100000, 'a') << "\"]";
  std::string long_value = error_of("seq=1..32@" + file.string());
  EXPECT_NE(long_value.find("must list positive integers"), std::string::npos) << long_value;
  EXPECT_LT(long_value.size(), 400u) << long_value;
  std::filesystem::remove(file);
}

// An importer that fails at a value inside the range (a node whose shapes do not
// agree there) is reported with the dimension and the value, not the node alone.
TEST(DynamicShapes, AModelThatDoesNotImportAtAValueNamesTheDimensionAndValue) {
  auto fails_below_32 = [](const std::vector<int64_t> &values) -> Graph {
    if (values.at(0) != 32) throw std::invalid_argument("Gemm (model node 'fc'): inner extents 930 and 1024 differ");
    return Graph();
  };
  try {
    find_symbolic_axes(fails_below_32, {parse_dim_range("H=8..32")});
    ADD_FAILURE() << "imported";
  } catch (const DynamicShapeError &e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the model does not import at 'H' = 31"), std::string::npos) << what;
    EXPECT_NE(what.find("model node 'fc'"), std::string::npos) << what;
  }
}

// A model that takes the low end of a range but not its top (a position table of 20
// rows) is reported with the largest value it takes, found by bisection.
TEST(DynamicShapes, AModelThatTakesPartOfTheRangeSaysWhereItEnds) {
  int imports = 0;
  auto table_of_20 = [&](const std::vector<int64_t> &values) -> Graph {
    ++imports;
    if (values.at(0) > 20) throw std::invalid_argument("node 'pos' (Gather): index 20 is out of range for extent 20");
    return Graph();
  };
  try {
    find_symbolic_axes(table_of_20, {parse_dim_range("seq=1..4096")});
    ADD_FAILURE() << "imported";
  } catch (const DynamicShapeError &e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("does not import at 'seq' = 4096"), std::string::npos) << what;
    EXPECT_NE(what.find("it imports at 'seq' up to 20: give --dim seq=1..20"), std::string::npos) << what;
  }
  EXPECT_LE(imports, 16);  // bisection, not a scan of the range
}

TEST(DynamicShapes, BucketsMinimizeTheExpectedPadding) {
  DimRange r = parse_dim_range("seq=1..128");
  auto expected_padding = [&](const DimRange &range, const std::vector<int64_t> &buckets) {
    double sum = 0;
    for (int64_t n = range.min; n <= range.max; ++n)
      sum += range.probability(n) * static_cast<double>(*std::lower_bound(buckets.begin(), buckets.end(), n)) /
             static_cast<double>(n);
    return sum;
  };
  std::vector<int64_t> b = choose_buckets(r, 8);
  ASSERT_LE(b.size(), 8u);
  EXPECT_EQ(b.back(), 128);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(std::adjacent_find(b.begin(), b.end()), b.end());
  for (int64_t v : b) EXPECT_TRUE(v <= 8 || v % 8 == 0) << v;
  EXPECT_LT(expected_padding(r, b), expected_padding(r, {1, 2, 4, 8, 16, 32, 64, 128}));
  EXPECT_EQ(choose_buckets(r, 1), std::vector<int64_t>{128});
  // Expected values draw the buckets to them: 100 is off the grid, 104 is the least above.
  DimRange w = parse_dim_range("seq=1..128@8,8,8,100");
  EXPECT_EQ(choose_buckets(w, 3), (std::vector<int64_t>{8, 104, 128}));
  EXPECT_EQ(choose_buckets(parse_dim_range("seq=1..16"), 16).size(), 16u);
  std::vector<double> mass = bucket_probabilities(w, {8, 104, 128});
  EXPECT_DOUBLE_EQ(mass[0], 0.75);
  EXPECT_DOUBLE_EQ(mass[1], 0.25);
  EXPECT_DOUBLE_EQ(mass[2], 0.0);
  // A long range stays quick: at most 8 buckets from a grid of ~256 candidates.
  std::vector<int64_t> wide = choose_buckets(parse_dim_range("seq=1..1048576"), 8);
  EXPECT_EQ(wide.back(), 1048576);
  EXPECT_LE(wide.size(), 8u);
}

// A call along a dimension whose rows never meet runs as at most two buckets that pad
// least: powers of two and the maximum.
TEST(DynamicShapes, SplitCallsPadLess) {
  const std::vector<int64_t> powers = {8, 16, 32, 64, 128, 256, 512, 1024};
  EXPECT_EQ(choose_split_buckets(parse_dim_range("batch=1..1024"), 8), powers);
  EXPECT_EQ(choose_split_buckets(parse_dim_range("batch=1..6"), 8), (std::vector<int64_t>{1, 2, 4, 6}));
  EXPECT_EQ(choose_split_buckets(parse_dim_range("batch=1..100"), 3), (std::vector<int64_t>{32, 64, 100}));
  EXPECT_EQ(support::split_into_pieces(600, powers, 2), (std::vector<int64_t>{512, 128}));
  EXPECT_EQ(support::split_into_pieces(520, powers, 2), (std::vector<int64_t>{512, 8}));
  EXPECT_EQ(support::split_into_pieces(1024, powers, 2), (std::vector<int64_t>{1024}));
  EXPECT_EQ(support::split_into_pieces(769, powers, 2), (std::vector<int64_t>{1024}))
      << "512 + 512 holds as many rows as 1024 alone, in two calls";
  EXPECT_EQ(support::split_into_pieces(3, powers, 2), (std::vector<int64_t>{8}));
  EXPECT_EQ(support::split_into_pieces(5, {1, 2, 4, 6}, 2), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(support::split_into_pieces(5, {1, 2, 4, 6}, 1), (std::vector<int64_t>{6}));
  EXPECT_TRUE(support::split_into_pieces(3000, powers, 2).empty());
  // Uniform 1..6 over 1, 2, 4, 6: 1 | 2 | 2+1 | 4 | 4+1 | 6.
  std::vector<double> runs = bucket_runs(parse_dim_range("batch=1..6"), {1, 2, 4, 6}, 2);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_DOUBLE_EQ(runs[0], 3.0 / 6);
  EXPECT_DOUBLE_EQ(runs[1], 2.0 / 6);
  EXPECT_DOUBLE_EQ(runs[2], 2.0 / 6);
  EXPECT_DOUBLE_EQ(runs[3], 1.0 / 6);
  EXPECT_EQ(bucket_runs(parse_dim_range("batch=1..6"), {1, 2, 4, 6}, 1),
            bucket_probabilities(parse_dim_range("batch=1..6"), {1, 2, 4, 6}));
}

// BERT's batch is row-independent (each sample on its own); its sequence is not
// (attention reads across it, the pooled output takes its first position).
TEST(DynamicShapes, RowsThatNeverMeetAreFound) {
  ImportAt batch_at = [](const std::vector<int64_t> &values) {
    ImportOptions options;
    options.dim_values = {{"batch", values.at(0)}, {"sequence", 8}};
    return import_onnx_file(bert_path(), options);
  };
  SymbolicGraph batch = find_symbolic_axes(batch_at, {parse_dim_range("batch=1..4")});
  EXPECT_EQ(rows_interact(batch, 0), "");
  SymbolicGraph sequence = find_symbolic_axes(bert_at(), {parse_dim_range("sequence=1..12")});
  EXPECT_NE(rows_interact(sequence, 0), "");
  // A softmax over the rows: they meet; one along each row: they do not.
  for (int64_t axis : {0, 1}) {
    ModelBuilder m;
    m.named_input("x", {"rows", "3"});
    ModelBuilder::attr(m.node("Softmax", {"x"}, {"s"}), "axis", axis);
    m.output("s");
    ImportAt rows_at = [&](const std::vector<int64_t> &values) {
      ImportOptions o;
      o.dim_values["rows"] = values.at(0);
      return m.import(o);
    };
    std::string why = rows_interact(find_symbolic_axes(rows_at, {parse_dim_range("rows=1..8")}), 0);
    if (axis == 1) {
      EXPECT_EQ(why, "");
      continue;
    }
    EXPECT_NE(why.find("reduces over it"), std::string::npos) << why;
  }
}

// The softmax's mask (where(valid, scores, -inf)) is computed in the scores' product, as
// the model's own attention mask is: the reshape between them sinks below it.
TEST(DynamicShapes, TheSoftmaxMaskJoinsTheScoresProduct) {
  SymbolicGraph s = find_symbolic_axes(bert_at(), {parse_dim_range("sequence=1..12")});
  PreparedModel bucket = prepare(bucket_graph(import_bert(12), s, {12}), {});
  int joined = 0, alone = 0;
  for (const Subgraph &g : bucket.subgraphs) {
    std::string ops;
    for (size_t k : g.nodes) ops += (ops.empty() ? "" : "+") + bucket.graph.nodes[k].op;
    if (ops.find("batch_matmul") != std::string::npos && ops.find("where") != std::string::npos) ++joined;
    if (ops == "where") ++alone;
  }
  EXPECT_GE(joined, 1) << "no product computes a mask";
  EXPECT_LT(alone, 6) << "every mask a step of its own";
}

TEST(DynamicShapes, AxesThatFollowTheDimensionAreFound) {
  SymbolicGraph s = find_symbolic_axes(bert_at(), {parse_dim_range("sequence=1..12")});
  ASSERT_EQ(s.at_max.inputs.size(), 3u);
  for (ValueId in : s.at_max.inputs) {
    const std::vector<SymbolicAxis> &axes = s.axes[static_cast<size_t>(in)];
    ASSERT_EQ(axes.size(), 2u);
    EXPECT_FALSE(axes[0].is_symbolic());
    EXPECT_EQ(axes[1], (SymbolicAxis{0, 1}));
  }
  // The sequence output follows it; the pooled class token does not.
  ASSERT_EQ(s.at_max.outputs.size(), 2u);
  const std::vector<SymbolicAxis> &sequence = s.axes[static_cast<size_t>(s.at_max.outputs[0])];
  const std::vector<SymbolicAxis> &pooled = s.axes[static_cast<size_t>(s.at_max.outputs[1])];
  EXPECT_EQ(sequence[1], (SymbolicAxis{0, 1}));
  EXPECT_FALSE(sequence[2].is_symbolic());
  for (const SymbolicAxis &a : pooled) EXPECT_FALSE(a.is_symbolic());
}

// The point of the masks: every length up to the bucket, padded, gives the model's
// outputs at that length; told the bucket's length instead, the padding leaks in.
TEST(DynamicShapes, PaddedBucketMatchesTheModelAtEveryLength) {
  const int64_t bucket_length = 8;
  SymbolicGraph s = find_symbolic_axes(bert_at(), {parse_dim_range("sequence=1..12")});
  Graph bucket = bucket_graph(import_bert(bucket_length), s, {bucket_length});
  ASSERT_EQ(bucket.inputs.size(), 4u);
  EXPECT_EQ(bucket.values[static_cast<size_t>(bucket.inputs[3])].name, dim_input_name("sequence"));
  size_t masks = 0;
  for (const Node &n : bucket.nodes)
    masks += n.op == "where" && n.inputs.size() == 3 &&
             bucket.values[static_cast<size_t>(n.output)].name.find(".masked") != std::string::npos;
  EXPECT_GE(masks, 4u);  // per layer: the scores before softmax, both sides of the context product
  // Through the pipeline's passes and fusion, as compiled.
  PreparedModel prepared = prepare(bucket, {});
  std::mt19937_64 rng(3);
  for (int64_t n = 1; n <= bucket_length; ++n) {
    Graph exact = import_bert(n);
    std::vector<ir::HostTensor> inputs = random_token_inputs(exact, rng);
    std::vector<ir::HostTensor> want = evaluate_reference(exact, inputs);
    EXPECT_LE(worst_error(run_padded(prepared.graph, inputs, static_cast<double>(n), want), want), 1e-5)
        << "length " << n;
    if (n <= bucket_length - 2)
      EXPECT_GT(worst_error(run_padded(prepared.graph, inputs, bucket_length, want), want), 1e-3) << "length " << n;
  }
}

// Softmax, a mean and a matrix product reducing over the dynamic axis.
TEST(DynamicShapes, ReductionsOverTheDynamicAxisSeeOnlyRealElements) {
  ModelBuilder m;
  m.named_input("x", {"rows", "3"});
  auto *softmax = m.node("Softmax", {"x"}, {"s"});
  ModelBuilder::attr(softmax, "axis", int64_t{0});
  auto *mean = m.node("ReduceMean", {"x"}, {"mean"});
  ModelBuilder::attr(mean, "axes", std::vector<int64_t>{0});
  auto *t = m.node("Transpose", {"x"}, {"xt"});
  ModelBuilder::attr(t, "perm", std::vector<int64_t>{1, 0});
  m.node("MatMul", {"xt", "x"}, {"gram"});
  auto *max = m.node("ReduceMax", {"x"}, {"max"});
  ModelBuilder::attr(max, "axes", std::vector<int64_t>{0});
  for (const char *out : {"s", "mean", "gram", "max"}) m.output(out);
  auto at = [&](const std::vector<int64_t> &values) {
    ImportOptions o;
    o.dim_values["rows"] = values.at(0);
    return m.import(o);
  };
  SymbolicGraph s = find_symbolic_axes(at, {parse_dim_range("rows=1..6")});
  Graph bucket = prepare(bucket_graph(at({6}), s, {6}), {}).graph;
  std::mt19937_64 rng(5);
  for (int64_t n = 1; n <= 6; ++n) {
    ir::HostTensor x(ir::DType::kFloat32, {n, 3});
    x.fill_random(rng, -2, 2);
    std::vector<ir::HostTensor> want = evaluate_reference(at({n}), {x});
    EXPECT_LE(worst_error(run_padded(bucket, {x}, static_cast<double>(n), want), want), 1e-5) << "rows " << n;
  }
}

std::string dynamic_error(const ModelBuilder &m, const std::string &dim, const std::string &range) {
  auto at = [&](const std::vector<int64_t> &values) {
    ImportOptions o;
    o.dim_values[dim] = values.at(0);
    return m.import(o);
  };
  try {
    SymbolicGraph s = find_symbolic_axes(at, {parse_dim_range(dim + "=" + range)});
    bucket_graph(at({s.symbols[0].max}), s, {s.symbols[0].max});
  } catch (const DynamicShapeError &e) {
    return e.what();
  }
  return "<no error>";
}

TEST(DynamicShapes, WhatCannotRunAtEveryValueIsRefusedByName) {
  {  // A class token prepended: the extent is the dimension plus one.
    ModelBuilder m;
    m.named_input("x", {"1", "seq", "4"});
    m.floats("cls", {1, 1, 4}, {1, 2, 3, 4});
    auto *concat = m.node("Concat", {"cls", "x"}, {"y"});
    ModelBuilder::attr(concat, "axis", int64_t{1});
    m.output("y");
    std::string e = dynamic_error(m, "seq", "2..8");
    EXPECT_NE(e.find("proportional to the dimension"), std::string::npos) << e;
  }
  {  // A convolution's window along a dynamic image width.
    ModelBuilder m;
    m.named_input("x", {"1", "1", "4", "width"});
    std::vector<float> w(9, 0.5f);
    m.floats("w", {1, 1, 3, 3}, w);
    auto *conv = m.node("Conv", {"x", "w"}, {"y"});
    ModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
    m.output("y");
    std::string e = dynamic_error(m, "width", "4..16");
    EXPECT_NE(e.find("conv2d"), std::string::npos) << e;
    EXPECT_NE(e.find("reads a window"), std::string::npos) << e;
  }
  {  // The dimension's value used as data: x / len(x).
    ModelBuilder m;
    m.named_input("x", {"seq"});
    m.node("Shape", {"x"}, {"shape"});
    m.node("Cast", {"shape"}, {"length"});
    ModelBuilder::attr(m.graph->mutable_node(1), "to", int64_t{onnx::TensorProto::FLOAT});
    m.node("Div", {"x", "length"}, {"y"});
    m.output("y");
    std::string e = dynamic_error(m, "seq", "1..8");
    EXPECT_NE(e.find("whose values change with it"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace kiln::frontend
