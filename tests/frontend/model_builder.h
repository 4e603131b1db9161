// Builds small ONNX models in tests of the importer and of what comes after it.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"

namespace kiln::frontend {

struct ModelBuilder {
  onnx::ModelProto model;
  onnx::GraphProto *graph;

  explicit ModelBuilder(int opset = 13) : graph(model.mutable_graph()) {
    model.set_ir_version(8);
    auto *o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    graph->set_name("g");
  }
  void input(const std::string &name, std::vector<int64_t> shape, int elem = onnx::TensorProto::FLOAT) {
    onnx::ValueInfoProto *v = graph->add_input();
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (int64_t d : shape) {
      auto *dim = t->mutable_shape()->add_dim();
      if (d > 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param("batch");
    }
  }
  // Dimensions given as numbers or names (dim_param): {"1", "seq"}.
  void named_input(const std::string &name, const std::vector<std::string> &dims, int elem = onnx::TensorProto::FLOAT) {
    onnx::ValueInfoProto *v = graph->add_input();
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    for (const std::string &d : dims) {
      auto *dim = t->mutable_shape()->add_dim();
      if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos)
        dim->set_dim_value(std::stoll(d));
      else
        dim->set_dim_param(d);
    }
  }
  void output(const std::string &name) { graph->add_output()->set_name(name); }
  onnx::TensorProto *floats(const std::string &name, std::vector<int64_t> shape, std::vector<float> values) {
    onnx::TensorProto *t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return t;
  }
  void ints(const std::string &name, std::vector<int64_t> values) {
    onnx::TensorProto *t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto *node(const std::string &op, std::vector<std::string> inputs, std::vector<std::string> outputs) {
    onnx::NodeProto *n = graph->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(graph->node_size()));
    for (auto &i : inputs) n->add_input(i);
    for (auto &o : outputs) n->add_output(o);
    return n;
  }
  static void attr(onnx::NodeProto *n, const std::string &name, int64_t v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto *n, const std::string &name, const std::vector<int64_t> &v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr(onnx::NodeProto *n, const std::string &name, float v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  Graph import(const ImportOptions &options = {}) const {
    return import_onnx_bytes(model.SerializeAsString(), options);
  }
  std::string error(const ImportOptions &options = {}) const {
    try {
      import(options);
    } catch (const ImportError &e) {
      return e.what();
    }
    return "<imported>";
  }
};

}  // namespace kiln::frontend
