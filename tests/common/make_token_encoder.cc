// Writes token_encoder.onnx: a BERT-style encoder layer as exporters write it, for the
// tests of models with token ids (tests/executor, tests/cli). Three int64 inputs
// (input_ids, token_type_ids, attention_mask, shape [1, 8]); embedding Gathers at run-time
// indices; the mask Unsqueezed, Cast to float and made additive; one attention head with
// LayerNorm in front. Two outputs: the context and the attention probabilities.
// Usage: kiln_make_token_encoder OUT.onnx
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.onnx\n", argv[0]);
    return 2;
  }
  onnx::ModelProto proto;
  constexpr int64_t kTokens = 8, kHidden = 16, kVocab = 30;
  proto.set_ir_version(8);
  proto.add_opset_import()->set_version(17);
  onnx::GraphProto *g = proto.mutable_graph();
  g->set_name("encoder");
  for (const char *name : {"input_ids", "token_type_ids", "attention_mask"}) {
    onnx::ValueInfoProto *in = g->add_input();
    in->set_name(name);
    auto *t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::INT64);
    for (int64_t d : {int64_t{1}, kTokens}) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> weight(-0.5f, 0.5f);
  auto floats = [&](const std::string &name, std::vector<int64_t> shape) {
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : shape) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(weight(rng));
  };
  auto ints = [&](const std::string &name, std::vector<int64_t> shape, std::vector<int64_t> values) {
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : shape) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  };
  auto node = [&](const std::string &op, std::vector<std::string> ins, const std::string &out) {
    onnx::NodeProto *n = g->add_node();
    n->set_op_type(op);
    for (const std::string &i : ins) n->add_input(i);
    n->add_output(out);
    return n;
  };
  floats("word_embeddings", {kVocab, kHidden});
  floats("type_embeddings", {2, kHidden});
  floats("position_embeddings", {kTokens, kHidden});
  ints("position_ids", {1, kTokens}, {0, 1, 2, 3, 4, 5, 6, 7});
  for (const char *w : {"wq", "wk", "wv"}) floats(w, {kHidden, kHidden});
  floats("gamma", {kHidden});
  floats("beta", {kHidden});
  ints("mask_axes", {2}, {1, 2});
  ints("perm_unused", {1}, {0});
  auto scalar = [&](const std::string &name, float value) {
    onnx::TensorProto *t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(value);
  };
  scalar("one", 1.0f);
  scalar("minus_big", -10000.0f);
  scalar("scale", 4.0f);
  auto int_attr = [](onnx::NodeProto *n, const std::string &name, int64_t value) {
    onnx::AttributeProto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  };

  node("Gather", {"word_embeddings", "input_ids"}, "words");
  node("Gather", {"type_embeddings", "token_type_ids"}, "types");
  node("Gather", {"position_embeddings", "position_ids"}, "positions");
  node("Add", {"words", "types"}, "wt");
  node("Add", {"wt", "positions"}, "embedded");
  int_attr(node("LayerNormalization", {"embedded", "gamma", "beta"}, "x"), "axis", -1);
  node("MatMul", {"x", "wq"}, "q");
  node("MatMul", {"x", "wk"}, "k");
  node("MatMul", {"x", "wv"}, "v");
  onnx::NodeProto *kt = node("Transpose", {"k"}, "kt");
  onnx::AttributeProto *perm = kt->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t p : {0, 2, 1}) perm->add_ints(p);
  node("MatMul", {"q", "kt"}, "qk");
  node("Div", {"qk", "scale"}, "scores");
  node("Unsqueeze", {"attention_mask", "mask_axes"}, "mask4");  // [1, 1, 1, tokens]
  int_attr(node("Cast", {"mask4"}, "maskf"), "to", onnx::TensorProto::FLOAT);
  node("Sub", {"one", "maskf"}, "inverted");
  node("Mul", {"inverted", "minus_big"}, "additive");
  node("Unsqueeze", {"scores", "perm_unused"}, "scores4");  // [1, 1, tokens, tokens]
  node("Add", {"scores4", "additive"}, "masked");
  int_attr(node("Softmax", {"masked"}, "probs"), "axis", -1);
  node("Squeeze", {"probs", "perm_unused"}, "probs3");
  node("MatMul", {"probs3", "v"}, "context");
  g->add_output()->set_name("context");
  g->add_output()->set_name("probs3");
  std::ofstream out(argv[1], std::ios::binary);
  if (!proto.SerializeToOstream(&out) || !out.flush()) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
