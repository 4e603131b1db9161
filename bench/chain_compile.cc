// Compile time of a chain of ONNX Relu nodes against its length: the model is built in
// memory, imported, fused and compiled untuned (what `kiln compile --model` does), and
// beside it one workload of the same length, as a hand-written workload file would
// give it (fusion does not cut it into groups), has its untuned schedule made (sketch
// generation and replay, no code generation). The model's time grows linearly with the
// length. The single workload's stays quadratic: its blocks are inlined one at a time
// into one expression, whose path is rebuilt and whose program is scanned per block;
// that is why fusion cuts a chain into groups of at most frontend::kMaxFusedNodes.
//
// usage: kiln_bench_chain_compile [LENGTH ...]   (default: 500 1000 2000 4000 20000)

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/compile.h"
#include "frontend/onnx_import.h"
#include "frontend/pipeline.h"
#include "ops/workload.h"
#include "search/space.h"
#include "te/te.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string relu_chain_onnx(int length) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto *g = model.mutable_graph();
  g->set_name("chain");
  auto value = [](onnx::ValueInfoProto *v, const std::string &name) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : {1, 16}) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "x0");
  for (int i = 0; i < length; ++i) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type("Relu");
    n->set_name("relu" + std::to_string(i));
    n->add_input("x" + std::to_string(i));
    n->add_output("x" + std::to_string(i + 1));
  }
  value(g->add_output(), "x" + std::to_string(length));
  return model.SerializeAsString();
}

kiln::ops::Workload relu_chain_workload(int length) {
  nlohmann::json ops = nlohmann::json::array();
  for (int i = 0; i < length; ++i)
    ops.push_back({{"op", "relu"},
                   {"args", {i == 0 ? std::string("in0") : "op" + std::to_string(i - 1)}},
                   {"attrs", nlohmann::json::object()}});
  return kiln::ops::Workload::from_json({{"kiln_workload", 1},
                                         {"inputs", {{{"dtype", "float32"}, {"shape", {1, 16}}}}},
                                         {"ops", ops},
                                         {"outputs", {"op" + std::to_string(length - 1)}}});
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<int> lengths;
  for (int i = 1; i < argc; ++i) lengths.push_back(std::atoi(argv[i]));
  if (lengths.empty()) lengths = {500, 1000, 2000, 4000, 20000};
  const std::string target = "llvm -num-cores=2";
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln_chain_" + std::to_string(getpid()));
  std::printf("%8s %8s %12s %12s %12s %16s\n", "length", "groups", "import+fuse", "compile", "per node",
              "one workload");
  for (int length : lengths) {
    auto start = Clock::now();
    kiln::frontend::PreparedModel model =
        kiln::frontend::prepare(kiln::frontend::import_onnx_bytes(relu_chain_onnx(length)), {});
    double fuse_s = seconds_since(start);
    start = Clock::now();
    kiln::executor::compile_model(model, {target, "", kiln::search::untuned_schedule, {}}, dir.string());
    double compile_s = seconds_since(start);
    // The single workload only up to 4000 blocks: beyond, its quadratic term dominates.
    std::string single = "-";
    if (length <= 4000) {
      start = Clock::now();
      kiln::ir::PrimFunc func = kiln::te::lower(relu_chain_workload(length).build_dag(), "chain");
      kiln::Target t = kiln::Target::parse(target);
      std::vector<kiln::ir::Trace> sketches = kiln::search::generate_sketches(func, kiln::search::untuned_rules(t), 0);
      kiln::search::realize(func, sketches.at(0), kiln::search::default_postprocessors(t), 0);
      single = std::to_string(seconds_since(start)).substr(0, 6) + " s";
    }
    std::printf("%8d %8zu %10.3f s %10.3f s %9.1f us %16s\n", length, model.subgraphs.size(), fuse_s, compile_s,
                1e6 * (fuse_s + compile_s) / length, single.c_str());
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
