// A fuzz target for the ONNX importer: any bytes either import or are refused with an
// ImportError; anything else (another exception, a crash, a sanitizer report) is a
// finding. LLVMFuzzerTestOneInput is libFuzzer's entry point; built without
// KILN_LIBFUZZER, a test drives it with the fixture models and deterministic mutations
// of them (flipped bytes, truncations, spliced runs), so every CI run fuzzes a bounded
// amount. Change the count: KILN_IMPORT_FUZZ_RUNS=<n> (default 400).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "frontend/onnx_import.h"

// True when the bytes imported, false when they were refused; anything else escapes.
static bool import_or_refuse(const uint8_t *data, size_t size) {
  try {
    kiln::frontend::import_onnx_bytes(std::string(reinterpret_cast<const char *>(data), size));
    return true;
  } catch (const kiln::frontend::ImportError &) {
    return false;  // a clear refusal is the expected outcome for most inputs
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  import_or_refuse(data, size);
  return 0;
}

#ifndef KILN_LIBFUZZER
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "tests/common/fuzz_mutations.h"

namespace kiln::frontend {
namespace {

std::string read_file(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using kiln::testing::mutate;

TEST(OnnxImportFuzz, SeedsAndTheirMutationsImportOrAreRefused) {
  std::vector<std::string> seeds = {read_file(std::filesystem::path(KILN_FRONTEND_MODELS) / "tiny_cnn.onnx"),
                                    read_file(std::filesystem::path(KILN_FRONTEND_MODELS) / "bert_tiny_opset17.onnx")};
  std::filesystem::path node_tests = KILN_ONNX_NODE_TESTS;
  for (const char *name :
       {"test_conv_with_strides_padding", "test_gemm_all_attributes", "test_reshape_extended_dims",
        "test_constantofshape_int_zeros", "test_slice", "test_pad", "test_layer_normalization_4d_axis1"})
    if (std::filesystem::exists(node_tests / name / "model.onnx"))
      seeds.push_back(read_file(node_tests / name / "model.onnx"));
  // The libFuzzer corpus, regression inputs of earlier findings included, as it is.
  std::filesystem::path corpus = std::filesystem::path(KILN_SOURCE_DIR) / "tests/fuzz/corpus/onnx_import";
  size_t corpus_files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(corpus)) {
    std::string input = read_file(entry.path());
    EXPECT_NO_THROW(import_or_refuse(reinterpret_cast<const uint8_t *>(input.data()), input.size())) << entry.path();
    ++corpus_files;
  }
  EXPECT_GT(corpus_files, 0u) << corpus;
  const char *env = std::getenv("KILN_IMPORT_FUZZ_RUNS");
  int runs = env ? std::atoi(env) : 400;
  std::mt19937_64 rng(12345);
  int imported = 0, refused = 0;
  for (int i = 0; i < runs; ++i) {
    std::string input = mutate(seeds[static_cast<size_t>(i) % seeds.size()], rng);
    // Only ImportError may leave the importer; anything else fails the test here.
    EXPECT_NO_THROW(
        (import_or_refuse(reinterpret_cast<const uint8_t *>(input.data()), input.size()) ? imported : refused)++)
        << "mutation " << i << " of seed " << i % seeds.size();
  }
  // Both outcomes occur: the mutations reach past the parser into the importers.
  EXPECT_GT(imported, 0);
  EXPECT_GT(refused, 0);
  std::cout << runs << " mutated models: " << imported << " imported, " << refused << " refused\n";
}

}  // namespace
}  // namespace kiln::frontend
#endif
