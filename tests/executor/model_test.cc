// Compiled models: the exported models compile (untuned, and with a tuned record for a
// subgraph), load, run and give PyTorch's outputs; bad folders and inputs are errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "database/database.h"
#include "executor/compile.h"
#include "executor/model.h"
#include "executor/tensor_file.h"
#include "frontend/onnx_import.h"
#include "frontend/pipeline.h"
#include "frontend/reference.h"
#include "ir/lower_passes.h"
#include "search/space.h"
#include "te/te.h"

namespace kiln::executor {
namespace {

std::string models_dir() { return KILN_FRONTEND_MODELS; }

std::filesystem::path temp_dir();

struct RemoveTempDir : ::testing::Environment {
  void TearDown() override { std::filesystem::remove_all(temp_dir()); }
};
const auto *const kCleanup = ::testing::AddGlobalTestEnvironment(new RemoveTempDir);

std::filesystem::path temp_dir() {
  static std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("kiln_executor_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

ir::HostTensor read_floats(const std::string &path, const ir::TensorType &type) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string bytes = s.str();
  ir::HostTensor t(type.dtype, type.shape);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), t.size() * 4) << path;
  std::memcpy(t.data(), bytes.data(), std::min<size_t>(bytes.size(), static_cast<size_t>(t.size()) * 4));
  return t;
}

using Fused = frontend::PreparedModel;

// The exported model through the pipeline; by default as written (NCHW, direct
// convolutions), with weights constant.
Fused import(const std::string &name, frontend::PipelineOptions options = {frontend::ImageLayout::kNCHW, false, true}) {
  return frontend::prepare(frontend::import_onnx_file(models_dir() + "/" + name + ".onnx"), options);
}

// What kiln compile passes: the search's untuned default for subgraphs without records.
CompileOptions options_for(const std::string &target, const std::string &db = "") {
  return {target, db, search::untuned_schedule, {}};
}

void expect_reference_output(Model &model, const std::string &name) {
  ir::HostTensor input = read_floats(models_dir() + "/" + name + ".input.bin", model.input_types().at(0));
  ir::HostTensor got = model.run({input}).at(0);
  ir::HostTensor want = read_floats(models_dir() + "/" + name + ".ref.bin", model.output_types().at(0));
  EXPECT_LE(ir::relative_l2_error(got, want), 1e-4) << name;
  // A second inference reuses every buffer and gives the same result.
  EXPECT_TRUE(ir::exactly_equal(model.run({input}).at(0), got)) << name;
}

class CompiledModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CompiledModel, UntunedMatchesTheExporter) {
  Fused f = import(GetParam());
  std::string dir = (temp_dir() / (GetParam() + ".kiln")).string();
  CompileReport report = compile_model(f, options_for("llvm -num-cores=2"), dir);
  EXPECT_EQ(report.subgraphs, f.subgraphs.size());
  EXPECT_EQ(report.untuned + report.views, f.subgraphs.size());
  // Subgraphs that only reshape a computed tensor run as views: no step.
  size_t reshapes = 0;
  for (const frontend::Subgraph &s : f.subgraphs)
    reshapes += s.workload.ops.size() == 1 && s.workload.ops[0].op == "reshape" &&
                !f.graph.values[static_cast<size_t>(s.inputs[0])].is_constant();
  EXPECT_EQ(report.views, reshapes);
  if (GetParam() == "bert_tiny") EXPECT_GT(report.views, 0u) << "an attention block reshapes around its products";
  Model model = Model::load(dir);
  EXPECT_EQ(model.num_steps(), f.subgraphs.size() - report.views);
  // weights.bin holds the constants the steps read, once each, and nothing else.
  std::set<frontend::ValueId> read;
  for (const frontend::Subgraph &s : f.subgraphs)
    for (frontend::ValueId v : s.inputs)
      if (f.graph.values[static_cast<size_t>(v)].is_constant()) read.insert(v);
  uintmax_t weight_bytes = 0;
  for (frontend::ValueId v : read) {
    const frontend::Value &value = f.graph.values[static_cast<size_t>(v)];
    weight_bytes += static_cast<uintmax_t>(value.constant->size() * ir::dtype_bytes(value.type.dtype));
  }
  EXPECT_EQ(std::filesystem::file_size(std::filesystem::path(dir) / "weights.bin"), weight_bytes);
  // Activations whose lifetimes do not overlap share the arena.
  EXPECT_EQ(model.arena_bytes(), report.arena_bytes);
  EXPECT_LT(model.arena_bytes(), model.unplanned_bytes());
  expect_reference_output(model, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Models, CompiledModel,
                         ::testing::Values("tiny_cnn", "mlp", "bert_tiny", "bert_tiny_opset17", "mobilenet_block",
                                           "odd_cnn", "attention_block", "token_head"));

// Models as torch.onnx.export writes them today (tests/frontend/models/
// export_torch_models.py): a BERT-style encoder fed token ids, type ids and a padded
// attention mask, giving its sequence and its pooled class token, at opsets 14 to 21
// (IR 7 to 10, weights in an external data file, a dynamic export fixed by shapes, the
// mask as current transformers make it: Cast to bool and a run-time Where); a
// ViT with a class token; GoogLeNet's ceil-mode pools; nearest and bilinear Resize (a
// detector's neck, a segmentation head); two inputs and two outputs.
// Every output matches ONNX Runtime's, in the default pipeline (NHWC, Winograd).
class ExportedModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportedModel, EveryOutputMatchesOnnxRuntime) {
  const std::string base = models_dir() + "/" + GetParam();
  frontend::ImportOptions import_options;
  if (GetParam() == "bert_ids_dynamic")
    for (const char *name : {"input_ids", "token_type_ids", "attention_mask"})
      import_options.input_shapes[name] = {1, 16};
  Fused f = frontend::prepare(frontend::import_onnx_file(base + ".onnx", import_options), {});
  const std::string dir = (temp_dir() / (GetParam() + ".kiln")).string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  std::vector<ir::HostTensor> inputs;
  for (size_t i = 0; i < model.input_names().size(); ++i)
    inputs.push_back(read_tensor_file(base + ".in." + model.input_names()[i] + ".npy", model.input_types()[i]));
  std::vector<ir::HostTensor> outputs = model.run(inputs);
  ASSERT_EQ(outputs.size(), model.output_names().size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string &name = model.output_names()[i];
    ir::HostTensor want = read_tensor_file(base + ".out." + name + ".npy", model.output_types()[i]);
    EXPECT_LE(ir::relative_l2_error(outputs[i], want), 1e-4) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Exports, ExportedModel,
                         ::testing::Values("bert_ids_opset14", "bert_ids_opset17", "bert_ids_dynamic",
                                           "bert_ids_opset18", "bert_ids_opset19", "bert_ids_opset20",
                                           "bert_ids_opset21", "bert_ids_masked_fill", "vit_cls", "vit_cls_opset18",
                                           "googlenet_pools", "upsampling_neck", "upsampling_neck_opset18", "two_io"));

// Operators the importer composes of Kiln's own (LeakyRelu, Elu, Softplus, LogSoftmax),
// Split into slices, and a ceil-mode pool with a partial last window compile and run
// like the reference evaluation of the imported graph.
TEST(CompiledModel, ComposedOperatorsSplitsAndCeilPoolsMatchTheReference) {
  onnx::ModelProto proto;
  proto.set_ir_version(10);
  proto.add_opset_import()->set_version(21);
  onnx::GraphProto *g = proto.mutable_graph();
  g->set_name("composed");
  onnx::ValueInfoProto *in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 4, 7, 7})
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  auto node = [&](const std::string &op, std::vector<std::string> ins, std::vector<std::string> outs) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    for (const std::string &i : ins) n->add_input(i);
    for (const std::string &o : outs) n->add_output(o);
    return n;
  };
  auto ints = [](onnx::NodeProto *n, const std::string &name, std::vector<int64_t> values) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(values.size() == 1 && name != "kernel_shape" && name != "strides" ? onnx::AttributeProto::INT
                                                                                  : onnx::AttributeProto::INTS);
    if (a->type() == onnx::AttributeProto::INT)
      a->set_i(values[0]);
    else
      for (int64_t v : values) a->add_ints(v);
  };
  onnx::NodeProto *pool = node("MaxPool", {"x"}, {"pooled"});  // 7 -> 4 with ceil_mode
  ints(pool, "kernel_shape", {2, 2});
  ints(pool, "strides", {2, 2});
  ints(pool, "ceil_mode", {1});
  node("LeakyRelu", {"pooled"}, {"leaky"});
  onnx::NodeProto *split = node("Split", {"leaky"}, {"a", "b"});
  ints(split, "axis", {1});
  ints(split, "num_outputs", {2});
  node("Elu", {"a"}, {"elu"});
  node("Softplus", {"b"}, {"softplus"});
  onnx::NodeProto *concat = node("Concat", {"elu", "softplus"}, {"joined"});
  ints(concat, "axis", {1});
  node("Flatten", {"joined"}, {"flat"});
  node("LogSoftmax", {"flat"}, {"y"});
  g->add_output()->set_name("y");

  frontend::Graph graph = frontend::import_onnx_bytes(proto.SerializeAsString(), {}, "the composed model");
  Fused f = frontend::prepare(graph, {frontend::ImageLayout::kNCHW, false, true});
  std::string dir = (temp_dir() / "composed.kiln").string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  ir::HostTensor x(ir::DType::kFloat32, {1, 4, 7, 7});
  std::mt19937_64 rng(3);
  x.fill_random(rng, -4, 4);
  ir::HostTensor want = frontend::evaluate_reference(graph, {x}).at(0);
  ir::HostTensor got = model.run({x}).at(0);
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{1, 64}));
  EXPECT_LE(ir::relative_l2_error(got, want), 1e-5);
}

// A BERT-style encoder layer as exporters write it (tests/common/make_token_encoder.cc):
// int64 token ids, token types and an attention mask as graph inputs; embedding Gathers
// at run-time indices; the mask cast to float and made additive at run time. It compiles,
// runs like the reference evaluation, and refuses token ids outside the vocabulary by name.
TEST(CompiledModel, TokenIdsMasksAndEmbeddingLookupsRunAsExported) {
  constexpr int64_t kTokens = 8;
  frontend::Graph graph = frontend::import_onnx_file(KILN_TOKEN_ENCODER_MODEL);
  ASSERT_EQ(graph.outputs.size(), 2u);
  Fused f = frontend::prepare(graph, {frontend::ImageLayout::kNCHW, false, true});
  std::string dir = (temp_dir() / "encoder.kiln").string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  ASSERT_EQ(model.input_types().at(0).dtype, ir::DType::kInt64);
  auto int64s = [](std::vector<int64_t> values) {
    ir::HostTensor t(ir::DType::kInt64, {1, kTokens});
    for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(values[i]));
    return t;
  };
  std::vector<ir::HostTensor> inputs = {int64s({2, 29, 7, 0, 13, 13, 5, 1}), int64s({0, 0, 0, 0, 1, 1, 1, 1}),
                                        int64s({1, 1, 1, 1, 1, 1, 0, 0})};
  std::vector<ir::HostTensor> want = frontend::evaluate_reference(graph, inputs), got = model.run(inputs);
  for (size_t o = 0; o < want.size(); ++o) EXPECT_LE(ir::relative_l2_error(got.at(o), want[o]), 1e-5) << o;
  // Random inputs (kiln bench) stay inside the vocabulary.
  EXPECT_NO_THROW(model.run(model.random_inputs(5)));

  inputs[0] = int64s({2, 30, 7, 0, 13, 13, 5, 1});
  try {
    model.run(inputs);
    ADD_FAILURE() << "a token id outside the vocabulary was accepted";
  } catch (const ModelError &e) {
    EXPECT_NE(std::string(e.what()).find("input 'input_ids' holds 30 at element 1, but it indexes a table of 30 rows"),
              std::string::npos)
        << e.what();
  }
}

// The CNNs with their images in NHWC (`--layout NHWC`) compile and give the exporter's
// output: the transposes in and out run as steps, the convolutions channels-last.
class CompiledNhwcModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CompiledNhwcModel, UntunedMatchesTheExporter) {
  Fused f = import(GetParam(), {frontend::ImageLayout::kNHWC, false, true});
  std::string dir = (temp_dir() / (GetParam() + ".nhwc.kiln")).string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  expect_reference_output(model, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Models, CompiledNhwcModel, ::testing::Values("tiny_cnn", "mobilenet_block", "odd_cnn"));

// tiny_cnn's second convolution (16 -> 32 channels, 32x32) as Winograd transforms and
// 16 matrix products, compiled untuned: the transforms' generated code and the
// pre-packed transformed weights give the exporter's output.
TEST(CompiledWinogradModel, UntunedMatchesTheExporter) {
  Fused f = import("tiny_cnn", {frontend::ImageLayout::kNHWC, true, true});
  size_t transforms = 0;
  for (const frontend::Node &n : f.graph.nodes) transforms += n.op == "winograd_input_transform";
  ASSERT_EQ(transforms, 1u);
  std::string dir = (temp_dir() / "tiny_cnn.winograd.kiln").string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  expect_reference_output(model, "tiny_cnn");
}

TEST(CompiledModelZeroCopy, InputAndOutputPointersRunWithoutCopies) {
  Fused f = import("tiny_cnn");
  std::string dir = (temp_dir() / "zero_copy.kiln").string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  ir::HostTensor input = read_floats(models_dir() + "/tiny_cnn.input.bin", model.input_types().at(0));
  std::memcpy(model.input_data(0), input.data(), static_cast<size_t>(input.size()) * 4);
  model.run();
  ir::HostTensor got(ir::DType::kFloat32, model.output_types().at(0).shape);
  std::memcpy(got.data(), model.output_data(0), static_cast<size_t>(got.size()) * 4);
  ir::HostTensor want = read_floats(models_dir() + "/tiny_cnn.ref.bin", model.output_types().at(0));
  EXPECT_LE(ir::relative_l2_error(got, want), 1e-4);
}

// A record of `trace` for `workload`, as tuning stores it.
void commit_trace(db::Database &db, const ops::Workload &workload, const std::string &target, const ir::Trace &trace) {
  db::Record r;
  r.workload.canonical_json = workload.canonical_string();
  r.target = target;
  r.trace_json = trace.to_json().dump();
  r.outcome = std::vector<double>{1e-4};
  db.commit({r});
}

// A database record for a subgraph's workload key is the schedule it compiles with.
TEST(CompiledModelWithDatabase, TunedRecordsAreUsed) {
  Fused f = import("tiny_cnn");
  const std::string target = "llvm -num-cores=2";
  std::filesystem::path db_path = temp_dir() / "tuned.db";
  {
    auto db = db::Database::open(db_path, db::OpenMode::kCreate);
    const frontend::Subgraph &conv = f.subgraphs.at(0);  // conv2d+relu
    ir::PrimFunc func = te::lower(conv.workload.build_dag(), "conv");
    Target t = Target::parse(target);
    std::vector<ir::Trace> sketches = search::generate_sketches(func, search::default_rules(t), 1);
    std::optional<search::Candidate> c;
    for (uint64_t seed = 0; !c && seed < 16; ++seed)
      c = search::realize(func, sketches.front(), search::default_postprocessors(t), seed);
    ASSERT_TRUE(c);
    commit_trace(db, conv.workload, target, c->trace);
  }
  std::string dir = (temp_dir() / "tuned.kiln").string();
  CompileReport report = compile_model(f, options_for(target, db_path.string()), dir);
  EXPECT_EQ(report.tuned, 1u);
  EXPECT_EQ(report.untuned + report.views, f.subgraphs.size() - 1);
  Model model = Model::load(dir);
  expect_reference_output(model, "tiny_cnn");

  // Each step says what it is and, when tuned, the latency its record was tuned to;
  // profiling times every step inside the inference without changing the output.
  ASSERT_EQ(model.steps().size(), f.subgraphs.size());
  for (size_t i = 0; i < f.subgraphs.size(); ++i) {
    EXPECT_EQ(model.steps()[i].workload, f.subgraphs[i].workload.summary());
    EXPECT_EQ(model.steps()[i].key_hash, f.subgraphs[i].workload.key_hash());
    EXPECT_EQ(model.steps()[i].tuned, i == 0);
    EXPECT_EQ(model.steps()[i].tuned_ms.has_value(), i == 0);
  }
  EXPECT_DOUBLE_EQ(model.steps()[0].tuned_ms.value_or(0), 1e-4 * 1e3);
  std::vector<double> step_ms = model.profile_steps(model.random_inputs(), 3);
  ASSERT_EQ(step_ms.size(), f.subgraphs.size());
  for (double ms : step_ms) EXPECT_GT(ms, 0);
  expect_reference_output(model, "tiny_cnn");
}

// Subgraph workloads mark the weights constant; a tuned program that copies them into
// panels reads them packed ahead of time: the step's artifact says so, Model::load
// packs them once, and the model still gives the exporter's output.
TEST(CompiledModelWithDatabase, WeightsPackedAheadOfTimeArePackedAtLoad) {
  Fused f = import("mlp");
  const std::string target = "llvm -num-cores=2";
  Target t = Target::parse(target);
  std::filesystem::path db_path = temp_dir() / "packed.db";
  size_t packed_step = f.subgraphs.size();
  {
    auto db = db::Database::open(db_path, db::OpenMode::kCreate);
    for (size_t i = 0; i < f.subgraphs.size() && packed_step == f.subgraphs.size(); ++i) {
      const frontend::Subgraph &s = f.subgraphs[i];
      ir::PrimFunc func = te::lower(s.workload.build_dag(), "sg");
      for (const ir::Trace &sketch : search::generate_sketches(func, search::default_rules(t), 1)) {
        std::optional<search::Candidate> c;
        for (uint64_t seed = 0; !c && seed < 16; ++seed)
          c = search::realize(func, sketch, search::default_postprocessors(t), seed);
        if (!c || ir::packed_inputs(c->func).empty()) continue;
        commit_trace(db, s.workload, target, c->trace);
        packed_step = i;
        break;
      }
    }
  }
  ASSERT_LT(packed_step, f.subgraphs.size()) << "no sketch of mlp's subgraphs packs its weights";
  std::string dir = (temp_dir() / "packed.kiln").string();
  CompileReport report = compile_model(f, options_for(target, db_path.string()), dir);
  EXPECT_EQ(report.tuned, 1u);
  std::ifstream manifest(std::filesystem::path(dir) / "model.json");
  std::string artifact = nlohmann::json::parse(manifest)["steps"][packed_step]["artifact"];
  std::ifstream so(std::filesystem::path(dir) / artifact, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(so)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("packed_from"), std::string::npos);
  Model model = Model::load(dir);
  expect_reference_output(model, "mlp");
}

// With choose_in_model, each tuned step's next programs are built and timed inside the
// compiled model; whichever it keeps, the folder holds one artifact per step, the
// manifest names the record each step runs, and the model gives the exporter's output.
// Weights packed ahead of time are packed again for every program tried.
// A database with up to three sampled programs of every subgraph, timed 0.1 ms, 0.11 ms,
// 0.12 ms in order; returns each subgraph's latencies (seconds).
std::vector<std::vector<double>> database_of_sampled_programs(const Fused &f, const std::string &target,
                                                              const std::filesystem::path &db_path) {
  Target t = Target::parse(target);
  std::vector<std::vector<double>> latencies(f.subgraphs.size());
  auto db = db::Database::open(db_path, db::OpenMode::kCreate);
  for (size_t i = 0; i < f.subgraphs.size(); ++i) {
    const frontend::Subgraph &s = f.subgraphs[i];
    ir::PrimFunc func = te::lower(s.workload.build_dag(), "sg");
    std::set<std::string> traces;
    for (const ir::Trace &sketch : search::generate_sketches(func, search::default_rules(t), 1))
      for (uint64_t seed = 0; seed < 8 && traces.size() < 3; ++seed)
        if (auto c = search::realize(func, sketch, search::default_postprocessors(t), seed)) {
          std::string trace = c->trace.to_json().dump();
          if (!traces.insert(trace).second) continue;
          db::Record r;
          r.workload.canonical_json = s.workload.canonical_string();
          r.target = target;
          r.trace_json = trace;
          r.outcome = std::vector<double>{1e-4 * (1 + 0.1 * static_cast<double>(traces.size() - 1))};
          latencies[i].push_back(r.latencies()[0]);
          db.commit({r});
        }
  }
  return latencies;
}

TEST(CompiledModelWithDatabase, OtherProgramsAreTimedInsideTheModel) {
  Fused f = import("mlp");
  const std::string target = "llvm -num-cores=2";
  std::filesystem::path db_path = temp_dir() / "choose.db";
  std::vector<std::vector<double>> latencies = database_of_sampled_programs(f, target, db_path);
  for (size_t i = 0; i < f.subgraphs.size(); ++i)
    ASSERT_GE(latencies[i].size(), 2u) << f.subgraphs[i].workload.summary();
  CompileOptions options = options_for(target, db_path.string());
  options.choose_in_model = 2;
  size_t told = 0;
  std::string dir = (temp_dir() / "choose.kiln").string();
  CompileReport report = compile_model(f, options, dir, {}, [&](const InModelChoice &) { ++told; });
  EXPECT_EQ(report.tuned, f.subgraphs.size() - report.views);
  ASSERT_EQ(report.in_model.size(), f.subgraphs.size() - report.views);
  EXPECT_EQ(told, f.subgraphs.size() - report.views);
  for (const InModelChoice &c : report.in_model) {
    EXPECT_EQ(c.tried, latencies[c.step].size() - 1) << c.workload;
    EXPECT_LE(c.chosen_rank, c.tried);
    EXPECT_GT(c.window_ms, 0);
    EXPECT_GT(c.chosen_window_ms, 0);
    EXPECT_EQ(c.chosen_rank == 0, c.chosen_window_ms == c.window_ms);
  }
  size_t files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().string().find(".try"), std::string::npos) << entry.path();
    files += entry.path().extension() == ".so";
  }
  EXPECT_EQ(files, f.subgraphs.size());
  std::ifstream manifest_file(std::filesystem::path(dir) / "model.json");
  nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  for (size_t i = 0; i < f.subgraphs.size(); ++i) {
    size_t rank = report.in_model[i].chosen_rank;
    EXPECT_EQ(manifest["steps"][i].contains("chosen_in_model"), rank != 0);
    EXPECT_DOUBLE_EQ(manifest["steps"][i]["tuned_ms"].get<double>(), latencies[i][rank] * 1e3);
  }
  Model model = Model::load(dir);
  expect_reference_output(model, "mlp");

  // Every program of a step gives the same output there; another step's artifact is
  // refused and the step keeps its own.
  ir::HostTensor input = read_floats(models_dir() + "/mlp.input.bin", model.input_types().at(0));
  ir::HostTensor want = model.run({input}).at(0);
  std::string own = (std::filesystem::path(dir) / manifest["steps"][0]["artifact"].get<std::string>()).string();
  std::string other = (std::filesystem::path(dir) / manifest["steps"][1]["artifact"].get<std::string>()).string();
  EXPECT_THROW(model.replace_step(0, other), ModelError);
  EXPECT_THROW(model.replace_step(0, dir + "/missing.so"), ModelError);
  model.replace_step(0, own);
  EXPECT_LE(ir::relative_l2_error(model.run({input}).at(0), want), 1e-6);
}

// A model of token ids: the arena reuses the ids' bytes once they are read, so every
// timed run inside the model starts from the inputs again (the ids were once garbage by
// the second run, and refused as indices out of their table).
TEST(CompiledModelWithDatabase, ProgramsOfAModelOfTokenIdsAreTimedInsideIt) {
  Fused f = import("bert_ids_opset17");
  const std::string target = "llvm -num-cores=2";
  std::filesystem::path db_path = temp_dir() / "choose_ids.db";
  database_of_sampled_programs(f, target, db_path);
  CompileOptions options = options_for(target, db_path.string());
  options.choose_in_model = 1;
  std::string dir = (temp_dir() / "choose_ids.kiln").string();
  CompileReport report = compile_model(f, options, dir);
  EXPECT_FALSE(report.in_model.empty());
  Model model = Model::load(dir);
  std::vector<ir::HostTensor> inputs = model.random_inputs();
  EXPECT_EQ(model.profile_steps(inputs, 2).size(), model.num_steps());
}

// The message of the ModelError `f` throws.
std::string error_of(const std::function<void()> &f) {
  try {
    f();
  } catch (const ModelError &e) {
    return std::string(e.what());
  }
  return std::string("<no error>");
}

TEST(CompiledModelErrors, BadFoldersAndInputsAreClearErrors) {
  EXPECT_NE(error_of([] { Model::load((temp_dir() / "nothing").string()); }).find("is not a compiled model"),
            std::string::npos);
  std::filesystem::path damaged = temp_dir() / "damaged.kiln";
  std::filesystem::create_directories(damaged);
  std::ofstream(damaged / "model.json") << "{\"kiln_model\": 2, \"target\": ";
  EXPECT_NE(error_of([&] { Model::load(damaged.string()); }).find("is damaged"), std::string::npos);
  std::ofstream(damaged / "model.json") << "{\"kiln_model\": 1}";
  EXPECT_NE(error_of([&] { Model::load(damaged.string()); }).find("compile it again"), std::string::npos);

  Fused f = import("mlp");
  // An existing folder that is not a compiled model is never replaced.
  std::filesystem::path mine = temp_dir() / "my_files";
  std::filesystem::create_directories(mine);
  std::ofstream(mine / "notes.txt") << "keep me";
  EXPECT_NE(error_of([&] {
              compile_model(f, options_for("llvm -num-cores=2"), mine.string());
            }).find("exists and is not a compiled model"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(mine / "notes.txt"));
  std::string dir = (temp_dir() / "mlp_errors.kiln").string();
  compile_model(f, options_for("llvm -num-cores=2"), dir);
  Model model = Model::load(dir);
  ir::HostTensor wrong(ir::DType::kFloat32, {1, 783});
  EXPECT_NE(error_of([&] { model.run({wrong}); }).find("input 'input' must be float32 of 784 elements"),
            std::string::npos);
  EXPECT_NE(error_of([&] { model.run({}); }).find("the model has 1 inputs, 0 given"), std::string::npos);
  // A step's tuned latency that is not a number is damage, not a crash.
  {
    std::filesystem::path manifest_path = std::filesystem::path(dir) / "model.json";
    nlohmann::json manifest = nlohmann::json::parse(std::ifstream(manifest_path));
    nlohmann::json original = manifest;
    manifest["steps"][0]["tuned_ms"] = "fast";
    std::ofstream(manifest_path) << manifest.dump();
    EXPECT_NE(error_of([&] { Model::load(dir); }).find("is damaged"), std::string::npos);
    std::ofstream(manifest_path) << original.dump();
  }
  std::filesystem::remove(std::filesystem::path(dir) / "weights.bin");
  std::ofstream(std::filesystem::path(dir) / "weights.bin") << "short";
  EXPECT_NE(error_of([&] { Model::load(dir); }).find("weights.bin' is shorter than its manifest says"),
            std::string::npos);
}

// What a careless or hostile model.json does: each is refused with a message before
// anything is loaded or read out of bounds.
TEST(CompiledModelErrors, HostileManifestsAreRefusedBeforeLoading) {
  Fused f = import("tiny_cnn");
  std::filesystem::path dir = temp_dir() / "hostile.kiln";
  compile_model(f, options_for("llvm -num-cores=2"), dir.string());
  std::filesystem::path manifest_path = dir / "model.json";
  const nlohmann::json original = nlohmann::json::parse(std::ifstream(manifest_path));
  auto load_with = [&](const std::function<void(nlohmann::json &)> &change) {
    nlohmann::json m = original;
    change(m);
    std::ofstream(manifest_path) << m.dump();
    std::string error = error_of([&] { Model::load(dir.string()); });
    std::ofstream(manifest_path) << original.dump();
    return error;
  };
  // An arena offset near 2^63: offset + bytes overflows, the check must not.
  EXPECT_NE(load_with([](nlohmann::json &m) {
              for (nlohmann::json &v : m["values"])
                if (v.contains("arena_offset")) v["arena_offset"] = INT64_MAX - 7;
            }).find("a value lies outside the arena"),
            std::string::npos);
  // Sizes are checked against what backs them before anything is allocated: a weight
  // claiming 2^40 bytes is refused by weights.bin's size, an arena larger than every
  // activation together by the values.
  EXPECT_NE(load_with([](nlohmann::json &m) {
              for (nlohmann::json &v : m["values"])
                if (v.contains("offset")) {
                  v["shape"] = {int64_t{1} << 19, int64_t{1} << 19};
                  break;
                }
            }).find("weights.bin' is shorter than its manifest says"),
            std::string::npos);
  EXPECT_NE(load_with([](nlohmann::json &m) {
              m["arena_bytes"] = int64_t{1} << 40;
            }).find("arena_bytes is larger than all its activations together"),
            std::string::npos);
  // Artifacts outside the folder are never opened.
  std::ofstream(temp_dir() / "evil.so") << "not a library";
  for (const std::string &evil : {std::string("../evil.so"), (temp_dir() / "evil.so").string(), std::string("..")})
    EXPECT_NE(load_with([&](nlohmann::json &m) {
                m["steps"][0]["artifact"] = evil;
              }).find("is not a file name inside the model's folder"),
              std::string::npos)
        << evil;
  // An artifact that is not the one compiled is not opened (its constructors would run).
  std::filesystem::copy_file(dir / "sg1.so", dir / "other.so");
  EXPECT_NE(load_with([](nlohmann::json &m) {
              m["steps"][0]["artifact"] = "other.so";
            }).find("is not the artifact the model was compiled with"),
            std::string::npos);
  std::filesystem::remove(dir / "other.so");
  EXPECT_NE(load_with([](nlohmann::json &m) { m["steps"][0].erase("sha256"); }).find("is damaged"), std::string::npos);
  // A model without steps is no model.
  EXPECT_NE(load_with([](nlohmann::json &m) { m["steps"] = nlohmann::json::array(); }).find("it has no steps"),
            std::string::npos);
  // The original still loads and runs.
  Model model = Model::load(dir.string());
  expect_reference_output(model, "tiny_cnn");
}

// kiln compile -o DIR replaces DIR only when it is a compiled model holding nothing but
// its own files; a folder with a model.json and the user's notes is left as it was.
TEST(CompiledModelOutput, OnlyACompiledModelIsReplaced) {
  Fused f = import("mlp");
  std::filesystem::path dir = temp_dir() / "users_folder";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "model.json") << "{}";
  std::ofstream(dir / "notes.txt") << "keep me";
  EXPECT_THROW(compile_model(f, options_for("llvm -num-cores=2"), dir.string()), ModelError);
  EXPECT_TRUE(std::filesystem::exists(dir / "notes.txt"));

  std::filesystem::path model_dir = temp_dir() / "replaced.kiln";
  compile_model(f, options_for("llvm -num-cores=2"), model_dir.string());
  // A compiled model that also holds another file is not replaced either.
  std::ofstream(model_dir / "notes.txt") << "keep me";
  try {
    compile_model(f, options_for("llvm -num-cores=2"), model_dir.string());
    ADD_FAILURE() << "a compiled model holding notes.txt was replaced";
  } catch (const ModelError &e) {
    EXPECT_NE(std::string(e.what()).find("also holds 'notes.txt'"), std::string::npos) << e.what();
  }
  std::filesystem::remove(model_dir / "notes.txt");
  // A compiled model alone is replaced, and nothing is left beside it.
  compile_model(f, options_for("llvm -num-cores=2"), (model_dir.string() + "/"));
  Model model = Model::load(model_dir.string());
  expect_reference_output(model, "mlp");
  for (const auto &entry : std::filesystem::directory_iterator(temp_dir()))
    EXPECT_EQ(entry.path().filename().string().find(".partial."), std::string::npos) << entry.path();
  // The manifest records the pipeline the model was prepared with.
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(model_dir / "model.json"));
  EXPECT_EQ(frontend::PipelineOptions::from_json(manifest.at("pipeline")), f.options);
}

// Shapes whose sizes overflow 64 bits, or exceed what a model may hold, are refused
// at compile time with the value's name, not planned as a few bytes.
TEST(CompiledModelErrors, OversizedValuesAreRefusedAtCompile) {
  frontend::Graph g;
  ir::TensorType huge{{int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 20}, ir::DType::kFloat32};
  frontend::ValueId x = g.add_value({"x", huge, nullptr});
  frontend::ValueId y = g.add_value({"y", huge, nullptr});
  g.nodes.push_back({"relu", nlohmann::json::object(), {x}, y, "relu"});
  g.inputs = {x};
  g.outputs = {y};
  Fused f = frontend::prepare(g, {frontend::ImageLayout::kNCHW, false, true});
  try {
    compile_model(f, options_for("llvm -num-cores=2"), (temp_dir() / "huge.kiln").string());
    ADD_FAILURE() << "a model of 2^80 elements compiled";
  } catch (const ModelError &e) {
    EXPECT_NE(std::string(e.what()).find("value 'x'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GiB"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(temp_dir() / "huge.kiln"));
}

// A record whose trace does not replay on its subgraph is passed over for the next
// record, counted and warned about; the model still compiles tuned and runs.
TEST(CompiledModelWithDatabase, UnusableRecordsArePassedOver) {
  Fused f = import("tiny_cnn");
  const std::string target = "llvm -num-cores=2";
  std::filesystem::path db_path = temp_dir() / "poisoned.db";
  {
    auto db = db::Database::open(db_path, db::OpenMode::kCreate);
    const frontend::Subgraph &conv = f.subgraphs.at(0);
    ir::PrimFunc func = te::lower(conv.workload.build_dag(), "conv");
    Target t = Target::parse(target);
    std::optional<search::Candidate> c;
    for (uint64_t seed = 0; !c && seed < 16; ++seed)
      c = search::realize(func, search::generate_sketches(func, search::default_rules(t), 1).front(),
                          search::default_postprocessors(t), seed);
    ASSERT_TRUE(c);
    commit_trace(db, conv.workload, target, c->trace);
    // Faster on paper, and naming a loop the subgraph does not have.
    db::Record bad;
    bad.workload.canonical_json = conv.workload.canonical_string();
    bad.target = target;
    bad.trace_json =
        R"({"decisions":[],"instructions":[["get_block",[],{"name":"no_such_block"},["b0"]]],"kiln_trace":1})";
    bad.outcome = std::vector<double>{1e-9};
    db.commit({bad});
  }
  CompileReport report =
      compile_model(f, options_for(target, db_path.string()), (temp_dir() / "poisoned.kiln").string());
  EXPECT_EQ(report.tuned, 1u);
  EXPECT_EQ(report.unusable_records, 1u);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("unusable and was passed over"), std::string::npos) << report.warnings[0];
  Model model = Model::load((temp_dir() / "poisoned.kiln").string());
  expect_reference_output(model, "tiny_cnn");
}

}  // namespace
}  // namespace kiln::executor
