// The GoogleTest side of the fuzz targets (fuzz_target.h).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

#include "tests/common/fuzz_mutations.h"
#include "tests/fuzz/fuzz_target.h"

namespace kiln::testing {

int run_corpus_and_mutations(const std::string &name, const std::function<void(const std::string &)> &target) {
  std::filesystem::path dir = std::filesystem::path(KILN_FUZZ_CORPUS) / name;
  std::vector<std::string> seeds;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    seeds.push_back(bytes.str());
  }
  EXPECT_FALSE(seeds.empty()) << "no corpus in " << dir;
  if (seeds.empty()) return 0;
  const char *env = std::getenv("KILN_FUZZ_RUNS");
  int runs = env ? std::atoi(env) : 2000;
  std::mt19937_64 rng(std::hash<std::string>{}(name));
  int count = 0;
  for (const std::string &seed : seeds) {
    EXPECT_NO_THROW(target(seed)) << name << ": a corpus file";
    ++count;
  }
  std::string input;
  for (int i = 0; i < runs; ++i) {
    // Mutations pile up for a few steps, then start again from a seed.
    input = i % 4 == 0 ? mutate(seeds[static_cast<size_t>(i / 4) % seeds.size()], rng) : mutate(input, rng);
    EXPECT_NO_THROW(target(input)) << name << ": mutation " << i;
    ++count;
  }
  return count;
}

}  // namespace kiln::testing
