// The ONNX backend node tests (Debian's libonnx-testdata): every case whose operators
// Kiln imports must import, evaluate and match the expected outputs; a case Kiln
// refuses must be refused with an ImportError, never a crash. Prints
// "N passed, N failed, N skipped (unsupported)" and the skipped reasons by count.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "frontend/onnx_import.h"
#include "frontend/onnx_tensor.h"
#include "frontend/reference.h"

namespace kiln::frontend {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ir::HostTensor read_tensor(const fs::path &path) {
  onnx::TensorProto t;
  if (!t.ParseFromString(read_file(path))) throw std::runtime_error("cannot parse " + path.string());
  return tensor_from_onnx(t);
}

bool matches(const ir::HostTensor &got, const ir::HostTensor &want, std::string *why) {
  if (got.shape() != want.shape()) {
    *why = "shape " + shape_string(got.shape()) + ", expected " + shape_string(want.shape());
    return false;
  }
  if (ir::is_float(want.dtype())) {
    double err = ir::relative_l2_error(got, want);
    for (int64_t i = 0; i < want.size(); ++i)
      if (std::isnan(want.get(i)) != std::isnan(got.get(i))) err = 1;
    if (!(err <= 1e-4)) *why = "relative L2 error " + std::to_string(err);
    return err <= 1e-4;
  }
  for (int64_t i = 0; i < want.size(); ++i)
    if (got.get(i) != want.get(i)) {
      *why = "element " + std::to_string(i) + " differs";
      return false;
    }
  return true;
}

TEST(OnnxBackendNodeTests, SupportedCasesPassAndNoCaseCrashes) {
  fs::path root = KILN_ONNX_NODE_TESTS;
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " is missing: install libonnx-testdata (scripts/setup-deps)";
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  std::vector<fs::path> cases;
  for (const fs::directory_entry &e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  for (const fs::path &dir : cases) {
    std::string name = dir.filename().string();
    Graph g;
    try {
      g = import_onnx_file((dir / "model.onnx").string());
    } catch (const ImportError &e) {
      ++skipped;
      // The reason without the file's name, the opset number or the node's name.
      std::string reason = e.what();
      size_t ops = reason.find("Kiln does not import: ");
      if (ops != std::string::npos)
        reason = "unsupported: " + reason.substr(ops + 22);
      else if (reason.find(" changed meaning by opset") != std::string::npos)
        reason = "older opset where " +
                 reason.substr(reason.find(", and ") + 6, reason.find(" changed") - reason.find(", and ") - 6) +
                 " differs";
      else if (reason.find("): ") != std::string::npos)
        reason = reason.substr(reason.find("("));
      ++skip_reasons[reason.substr(0, 120)];
      continue;
    }
    for (const fs::directory_entry &set : fs::directory_iterator(dir)) {
      if (set.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      std::vector<ir::HostTensor> inputs, want;
      try {
        for (size_t i = 0; fs::exists(set.path() / ("input_" + std::to_string(i) + ".pb")); ++i)
          inputs.push_back(read_tensor(set.path() / ("input_" + std::to_string(i) + ".pb")));
        for (size_t i = 0; fs::exists(set.path() / ("output_" + std::to_string(i) + ".pb")); ++i)
          want.push_back(read_tensor(set.path() / ("output_" + std::to_string(i) + ".pb")));
      } catch (const ImportError &e) {
        // Older test data keeps bfloat16 tensors as UINT16, an element type of its own.
        ++skipped;
        ++skip_reasons[std::string("test data: ") + std::string(e.what()).substr(0, 100)];
        continue;
      }
      std::string why;
      bool ok = inputs.size() == g.inputs.size() && want.size() == g.outputs.size();
      if (!ok) why = "inputs/outputs differ in number";
      try {
        std::vector<ir::HostTensor> got = ok ? evaluate_reference(g, inputs) : std::vector<ir::HostTensor>{};
        for (size_t o = 0; ok && o < want.size(); ++o) ok = matches(got[o], want[o], &why);
      } catch (const std::exception &e) {
        ok = false;
        why = e.what();
      }
      if (ok) {
        ++passed;
      } else {
        ++failed;
        ADD_FAILURE() << name << "/" << set.path().filename().string() << ": " << why;
      }
    }
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped (unsupported)\n";
  for (const auto &[reason, count] : skip_reasons) std::cout << "  skipped " << count << ": " << reason << '\n';
  EXPECT_GT(passed, 100);
}

}  // namespace
}  // namespace kiln::frontend
