// One fuzz target per parser of outside input. KILN_FUZZ_TARGET(name) { ... } defines
// the function that takes one input; it must catch the errors the parser is meant to
// throw (a clear refusal) and let anything else escape. Built with KILN_LIBFUZZER
// (scripts/fuzz), it becomes libFuzzer's entry point and a crash, an escaped exception
// or a sanitizer report is a finding; otherwise it is a GoogleTest that runs the
// target's corpus (tests/fuzz/corpus/<name>) and deterministic mutations of it, so
// every test run fuzzes a bounded amount. KILN_FUZZ_RUNS=<n> sets the mutations (2000).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#ifdef KILN_LIBFUZZER

#define KILN_FUZZ_TARGET(name)                                              \
  static void fuzz_##name(const std::string &input);                        \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { \
    fuzz_##name(std::string(reinterpret_cast<const char *>(data), size));   \
    return 0;                                                               \
  }                                                                         \
  static void fuzz_##name(const std::string &input)

#else

#include <gtest/gtest.h>

#include <functional>

namespace kiln::testing {
/// Runs `target` on every corpus file of `name` and on mutations of them; returns the
/// number of inputs run.
int run_corpus_and_mutations(const std::string &name, const std::function<void(const std::string &)> &target);
}  // namespace kiln::testing

#define KILN_FUZZ_TARGET(name)                                                                    \
  static void fuzz_##name(const std::string &input);                                              \
  TEST(Fuzz, name) { EXPECT_GT(kiln::testing::run_corpus_and_mutations(#name, fuzz_##name), 0); } \
  static void fuzz_##name(const std::string &input)

#endif
