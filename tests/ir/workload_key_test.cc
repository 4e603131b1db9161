// The workload key is a contract with other compilers (docs/workload-key.md): the same
// task must always give the same canonical bytes and hash, and any change to what the
// task computes must change them.
//
// Regenerate the golden file after an intended format change (and bump the version):
//   KILN_UPDATE_GOLDEN=1 kiln_ir_tests --gtest_filter='WorkloadKey.GoldenFile'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "ops/workload.h"
#include "support/sha256.h"

namespace kiln::ir {

using ops::OpCall;
using ops::parse_shape;
using ops::Workload;
namespace {

using nlohmann::json;

const char kGoldenPath[] = KILN_SOURCE_DIR "/tests/ir/golden/workload_conv2d_bias_relu.json";

TensorType tensor(std::vector<int64_t> shape, DType dtype = DType::kFloat32) {
  return TensorType{std::move(shape), dtype};
}

// The fixed fused workload of the golden file: conv2d (with bias) + relu.
Workload conv2d_bias_relu() {
  Workload w;
  w.inputs = {tensor({1, 3, 8, 8}), tensor({4, 3, 3, 3}), tensor({4})};
  w.ops = {OpCall{"conv2d", {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}}, {"in0", "in1", "in2"}},
           OpCall{"relu", json::object(), {"op0"}}};
  w.outputs = {"op1"};
  return w;
}

Workload dense() { return Workload::single("dense", {tensor({4, 8}), tensor({6, 8})}); }

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The golden file's exact bytes, rebuilt from the workloads.
std::string golden_text() {
  json j = json::object();
  for (const auto &[name, w] :
       std::map<std::string, Workload>{{"conv2d_bias_relu", conv2d_bias_relu()}, {"dense", dense()}})
    j[name] = {{"canonical", w.canonical_string()}, {"hash", w.key_hash()}};
  return j.dump(2) + "\n";
}

// ---- SHA-256 itself ------------------------------------------------------------------------

TEST(WorkloadKey, Sha256MatchesPublishedTestVectors) {
  // FIPS 180-2 examples: one block, two blocks, and the empty string.
  EXPECT_EQ(support::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(support::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(support::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(support::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(WorkloadKey, HashIsSha256OfTheCanonicalString) {
  for (const Workload &w : {conv2d_bias_relu(), dense()}) {
    std::string hash = w.key_hash();
    EXPECT_EQ(hash, support::sha256_hex(w.canonical_string()));
    ASSERT_EQ(hash.size(), 64u);
    EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos) << hash;
  }
  // Digest of the dense canonical string, computed outside Kiln with `sha256sum`.
  EXPECT_EQ(dense().key_hash(), "48c06acc4058488f274f9d1dcbe7fa4fa7cad7282a47191131da3d3ef041281e");
}

// ---- the canonical form --------------------------------------------------------------------

TEST(WorkloadKey, CanonicalStringIsCompactJsonWithSortedKeysAndCompletedAttributes) {
  EXPECT_EQ(dense().canonical_string(),
            R"({"inputs":[{"dtype":"float32","shape":[4,8]},{"dtype":"float32","shape":[6,8]}],)"
            R"("kiln_workload":1,"ops":[{"args":["in0","in1"],"attrs":{},"op":"dense"}],"outputs":["op0"]})");
  std::string conv = conv2d_bias_relu().canonical_string();
  EXPECT_NE(conv.find(R"("attrs":{"dilations":[1,1],"groups":1,"layout":"NCHW","pads":[1,1,1,1],"strides":[1,1]})"),
            std::string::npos)
      << conv;
  EXPECT_EQ(conv.find_first_of(" \n\t"), std::string::npos) << conv;
}

TEST(WorkloadKey, GoldenFile) {
  std::string want = golden_text();
  if (std::getenv("KILN_UPDATE_GOLDEN")) {
    std::ofstream(kGoldenPath, std::ios::binary) << want;
    GTEST_SKIP() << "rewrote " << kGoldenPath;
  }
  std::string have = read_file(kGoldenPath);
  ASSERT_FALSE(have.empty()) << "cannot read " << kGoldenPath;
  EXPECT_EQ(have, want) << "the workload key format changed; if that is intended, bump Workload::kFormatVersion, "
                           "update docs/workload-key.md and regenerate with KILN_UPDATE_GOLDEN=1";
  // The entries, byte for byte, against the live computation.
  json golden = json::parse(have);
  EXPECT_EQ(golden.at("conv2d_bias_relu").at("canonical").get<std::string>(), conv2d_bias_relu().canonical_string());
  EXPECT_EQ(golden.at("conv2d_bias_relu").at("hash").get<std::string>(), conv2d_bias_relu().key_hash());
  EXPECT_EQ(golden.at("dense").at("canonical").get<std::string>(), dense().canonical_string());
  EXPECT_EQ(golden.at("dense").at("hash").get<std::string>(), dense().key_hash());
  // The hash in the file is the SHA-256 of the canonical string in the file.
  for (const char *name : {"conv2d_bias_relu", "dense"})
    EXPECT_EQ(support::sha256_hex(golden.at(name).at("canonical").get<std::string>()),
              golden.at(name).at("hash").get<std::string>())
        << name;
}

TEST(WorkloadKey, DocumentationShowsTheGoldenKeys) {
  std::string doc = read_file(KILN_SOURCE_DIR "/docs/workload-key.md");
  ASSERT_FALSE(doc.empty());
  for (const Workload &w : {conv2d_bias_relu(), dense()}) {
    EXPECT_NE(doc.find(w.canonical_string()), std::string::npos) << w.canonical_string();
    EXPECT_NE(doc.find(w.key_hash()), std::string::npos) << w.key_hash();
  }
  // The loosely written example of the page parses to the golden key.
  const char *loose = R"({"inputs": [{"shape": [1, 3, 8, 8]}, {"shape": [4, 3, 3, 3]}, {"shape": [4]}],
    "ops": [{"op": "conv2d", "attrs": {"strides": [1, 1], "pads": [1, 1, 1, 1]}, "args": ["in0", "in1", "in2"]},
            {"op": "relu", "args": ["op0"]}],
    "outputs": ["op1"]})";
  auto squeeze = [](std::string text) {
    std::erase_if(text, [](char c) { return c == ' ' || c == '\n'; });
    return text;
  };
  EXPECT_NE(squeeze(doc).find(squeeze(loose)), std::string::npos) << "the example in docs/workload-key.md changed";
  EXPECT_EQ(Workload::from_json(json::parse(loose)).key_hash(), conv2d_bias_relu().key_hash());
}

// ---- stability -----------------------------------------------------------------------------

TEST(WorkloadKey, SameWorkloadBuiltTwiceHasTheSameKey) {
  EXPECT_EQ(conv2d_bias_relu().canonical_string(), conv2d_bias_relu().canonical_string());
  EXPECT_EQ(conv2d_bias_relu().key_hash(), conv2d_bias_relu().key_hash());
  // Building the compute DAG does not disturb the key.
  Workload w = conv2d_bias_relu();
  std::string before = w.canonical_string();
  w.build_dag();
  EXPECT_EQ(w.canonical_string(), before);
}

TEST(WorkloadKey, JsonRoundTripKeepsTheKey) {
  for (const Workload &w : {conv2d_bias_relu(), dense()}) {
    Workload from_object = Workload::from_json(w.to_json());
    EXPECT_EQ(from_object.canonical_string(), w.canonical_string());
    Workload from_text = Workload::from_json(json::parse(w.canonical_string()));
    EXPECT_EQ(from_text.canonical_string(), w.canonical_string());
    EXPECT_EQ(from_text.key_hash(), w.key_hash());
    // Pretty-printed input parses to the same key.
    EXPECT_EQ(Workload::from_json(json::parse(w.to_json().dump(4))).key_hash(), w.key_hash());
  }
}

TEST(WorkloadKey, ExplicitDefaultAttributesGiveTheSameKey) {
  Workload implicit = Workload::single("conv2d", {tensor({1, 3, 8, 8}), tensor({4, 3, 3, 3})});
  Workload explicit_defaults = Workload::single(
      "conv2d", {tensor({1, 3, 8, 8}), tensor({4, 3, 3, 3})},
      {{"layout", "NCHW"}, {"strides", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"dilations", {1, 1}}, {"groups", 1}});
  EXPECT_EQ(implicit.canonical_string(), explicit_defaults.canonical_string());
  EXPECT_EQ(implicit.key_hash(), explicit_defaults.key_hash());

  // Attributes are normalised to the default's type: ONNX-style 0/1 booleans, integers
  // given for floats.
  EXPECT_EQ(Workload::single("reduce_sum", {tensor({3, 5})}, {{"keepdims", 1}}).key_hash(),
            Workload::single("reduce_sum", {tensor({3, 5})}).key_hash());
  EXPECT_EQ(Workload::single("reduce_sum", {tensor({3, 5})}, {{"keepdims", 0}}).key_hash(),
            Workload::single("reduce_sum", {tensor({3, 5})}, {{"keepdims", false}}).key_hash());
  EXPECT_EQ(Workload::single("clip", {tensor({3, 5})}, {{"min", 0}, {"max", 6}}).canonical_string(),
            Workload::single("clip", {tensor({3, 5})}, {{"min", 0.0}, {"max", 6.0}}).canonical_string());
  EXPECT_NE(Workload::single("clip", {tensor({3, 5})}, {{"min", 0}}).canonical_string().find(R"("min":0.0)"),
            std::string::npos);

  // A missing version field means the current version.
  json j = dense().to_json();
  j.erase("kiln_workload");
  EXPECT_EQ(Workload::from_json(j).key_hash(), dense().key_hash());
}

TEST(WorkloadKey, AttributeKeyOrderInInputJsonDoesNotMatter) {
  const char *forward = R"({"kiln_workload": 1,
    "inputs": [{"shape": [1, 3, 8, 8], "dtype": "float32"}, {"dtype": "float32", "shape": [4, 3, 3, 3]},
               {"shape": [4], "dtype": "float32"}],
    "ops": [{"op": "conv2d", "attrs": {"strides": [1, 1], "pads": [1, 1, 1, 1]}, "args": ["in0", "in1", "in2"]},
            {"op": "relu", "args": ["op0"]}],
    "outputs": ["op1"]})";
  const char *backward = R"({"outputs": ["op1"],
    "ops": [{"args": ["in0", "in1", "in2"], "attrs": {"pads": [1, 1, 1, 1], "groups": 1, "strides": [1, 1]},
             "op": "conv2d"},
            {"attrs": {}, "args": ["op0"], "op": "relu"}],
    "inputs": [{"dtype": "float32", "shape": [1, 3, 8, 8]}, {"shape": [4, 3, 3, 3], "dtype": "float32"},
               {"dtype": "float32", "shape": [4]}],
    "kiln_workload": 1})";
  Workload a = Workload::from_json(json::parse(forward));
  Workload b = Workload::from_json(json::parse(backward));
  EXPECT_EQ(a.canonical_string(), b.canonical_string());
  EXPECT_EQ(a.key_hash(), conv2d_bias_relu().key_hash());
  EXPECT_EQ(b.key_hash(), conv2d_bias_relu().key_hash());
}

// ---- sensitivity ---------------------------------------------------------------------------

TEST(WorkloadKey, EveryChangeToTheTaskChangesTheHash) {
  std::vector<std::pair<std::string, Workload>> variants;
  variants.emplace_back("base", conv2d_bias_relu());
  auto vary = [&](const std::string &what, const std::function<void(Workload &)> &change) {
    Workload w = conv2d_bias_relu();
    change(w);
    variants.emplace_back(what, std::move(w));
  };
  // Every dimension of every input, and the rank.
  for (size_t i = 0; i < 3; ++i) {
    for (size_t d = 0; d < conv2d_bias_relu().inputs[i].shape.size(); ++d)
      vary("in" + std::to_string(i) + " dim " + std::to_string(d), [&](Workload &w) { w.inputs[i].shape[d] += 1; });
    vary("in" + std::to_string(i) + " rank", [&](Workload &w) { w.inputs[i].shape.push_back(1); });
  }
  // Every dtype of every input.
  for (size_t i = 0; i < 3; ++i) {
    for (DType t : {DType::kFloat16, DType::kInt8, DType::kInt32, DType::kInt64, DType::kBool})
      vary("in" + std::to_string(i) + " " + dtype_name(t), [&](Workload &w) { w.inputs[i].dtype = t; });
  }
  // Every attribute of conv2d, each element of each list.
  vary("layout", [](Workload &w) { w.ops[0].attrs["layout"] = "NHWC"; });
  vary("groups", [](Workload &w) { w.ops[0].attrs["groups"] = 3; });
  for (const char *list : {"strides", "pads", "dilations"}) {
    size_t n = std::string(list) == "pads" ? 4 : 2;
    for (size_t k = 0; k < n; ++k) {
      vary(std::string(list) + "[" + std::to_string(k) + "]", [&](Workload &w) {
        json value = ops::complete_attrs(*ops::find_op("conv2d"), w.ops[0].attrs)[list];
        value[k] = value[k].get<int64_t>() + 1;
        w.ops[0].attrs[list] = value;
      });
    }
  }
  // Operators, their order and their wiring.
  vary("relu -> sigmoid", [](Workload &w) { w.ops[1].op = "sigmoid"; });
  vary("extra relu", [](Workload &w) {
    w.ops.push_back(OpCall{"relu", json::object(), {"op1"}});
    w.outputs = {"op2"};
  });
  vary("relu before conv2d", [](Workload &w) {
    w.ops = {OpCall{"relu", json::object(), {"in0"}},
             OpCall{"conv2d", {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}}, {"op0", "in1", "in2"}}};
  });
  vary("conv2d without bias", [](Workload &w) { w.ops[0].args = {"in0", "in1"}; });
  vary("swapped conv2d args", [](Workload &w) { w.ops[0].args = {"in1", "in0", "in2"}; });
  vary("relu of the input", [](Workload &w) { w.ops[1].args = {"in0"}; });
  vary("output is conv2d", [](Workload &w) { w.outputs = {"op0"}; });
  vary("both outputs", [](Workload &w) { w.outputs = {"op0", "op1"}; });
  vary("outputs reversed", [](Workload &w) { w.outputs = {"op1", "op0"}; });
  vary("inputs reordered", [](Workload &w) {
    std::swap(w.inputs[1], w.inputs[2]);
    w.ops[0].args = {"in0", "in2", "in1"};
  });

  std::map<std::string, std::string> seen;  // hash -> variant
  for (const auto &[what, w] : variants) {
    std::string hash = w.key_hash();
    auto [it, fresh] = seen.emplace(hash, what);
    EXPECT_TRUE(fresh) << "'" << what << "' has the same key as '" << it->second << "': " << w.canonical_string();
  }
  EXPECT_EQ(seen.size(), variants.size());
  EXPECT_GE(variants.size(), 45u);  // the loops above really ran
}

TEST(WorkloadKey, AttributeChangesOfOtherOperatorsChangeTheHash) {
  std::set<std::string> hashes;
  std::vector<Workload> variants = {
      Workload::single("reduce_sum", {tensor({3, 5})}),
      Workload::single("reduce_sum", {tensor({3, 5})}, {{"keepdims", false}}),
      Workload::single("reduce_sum", {tensor({3, 5})}, {{"axes", {1}}}),
      Workload::single("reduce_sum", {tensor({3, 5})}, {{"axes", {-1}}}),
      Workload::single("reduce_mean", {tensor({3, 5})}),
      Workload::single("clip", {tensor({3, 5})}, {{"min", 0.0}}),
      Workload::single("clip", {tensor({3, 5})}, {{"min", 0.5}}),
      Workload::single("clip", {tensor({3, 5})}, {{"min", 0.5}, {"max", 6.0}}),
      Workload::single("layer_norm", {tensor({3, 5}), tensor({5})}),
      Workload::single("layer_norm", {tensor({3, 5}), tensor({5})}, {{"epsilon", 1e-6}}),
      Workload::single("matmul", {tensor({5, 5}), tensor({5, 5})}),
      Workload::single("matmul", {tensor({5, 5}), tensor({5, 5})}, {{"transpose_a", true}}),
      Workload::single("matmul", {tensor({5, 5}), tensor({5, 5})}, {{"transpose_b", true}}),
      Workload::single("transpose", {tensor({2, 3, 5})}, {{"perm", {2, 0, 1}}}),
      Workload::single("transpose", {tensor({2, 3, 5})}, {{"perm", {1, 2, 0}}}),
  };
  for (const Workload &w : variants) EXPECT_TRUE(hashes.insert(w.key_hash()).second) << w.canonical_string();
}

// A constant input (a weight, packed ahead of time by tuned programs) is another task;
// "constant": false is the default and leaves the key as it was before the field.
TEST(WorkloadKey, ConstantInputsChangeTheKeyOnlyWhenSet) {
  Workload base = conv2d_bias_relu(), weights = conv2d_bias_relu();
  weights.inputs[1].constant = true;
  EXPECT_NE(base.key_hash(), weights.key_hash());
  EXPECT_EQ(base.canonical_string().find("constant"), std::string::npos);
  EXPECT_NE(weights.canonical_string().find(R"({"constant":true,"dtype":"float32","shape":[4,3,3,3]})"),
            std::string::npos);
  Workload back = Workload::from_json(json::parse(weights.canonical_string()));
  EXPECT_TRUE(back.inputs[1].constant);
  EXPECT_FALSE(back.inputs[0].constant);
  EXPECT_EQ(back.key_hash(), weights.key_hash());
  EXPECT_EQ(weights.build_dag().constant_inputs, std::vector<size_t>{1});
  json explicit_false = base.to_json();
  explicit_false["inputs"][0]["constant"] = false;
  EXPECT_EQ(Workload::from_json(explicit_false).key_hash(), base.key_hash());
  json wrong = base.to_json();
  wrong["inputs"][1]["constant"] = "yes";
  EXPECT_THROW(Workload::from_json(wrong), std::invalid_argument);
}

TEST(WorkloadKey, InvalidAttributesAreRejectedNotHashed) {
  EXPECT_THROW(
      Workload::single("conv2d", {tensor({1, 3, 8, 8}), tensor({4, 3, 3, 3})}, {{"stride", {2, 2}}}).key_hash(),
      std::invalid_argument);
  EXPECT_THROW(Workload::single("conv2d", {tensor({1, 3, 8, 8}), tensor({4, 3, 3, 3})}, {{"groups", 1.5}}).key_hash(),
               std::invalid_argument);
  EXPECT_THROW(Workload::single("no_such_op", {tensor({4})}).key_hash(), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

// Shapes on the command line: positive integers joined by 'x', nothing else.
TEST(ParseShape, AcceptsOnlyWholeShapes) {
  EXPECT_EQ(parse_shape("1x64x56x56"), (std::vector<int64_t>{1, 64, 56, 56}));
  EXPECT_EQ(parse_shape("7"), (std::vector<int64_t>{7}));
  for (const char *bad : {"2x3x", "x2", "2xx3", "0x3", "-1", "4.5", "", "2x3 ", "ax3"})
    EXPECT_THROW(parse_shape(bad), std::invalid_argument) << "'" << bad << "'";
}

}  // namespace
}  // namespace kiln::ir
