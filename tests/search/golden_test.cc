// The search's choices are a function of its seed and of the scores and measurements
// it is given: these goldens, recorded from the search as it stood, hold refactors of
// the rules, the trace machinery and the search loop to the same sketches and the same
// candidates, round after round. A second golden holds stored traces: every trace
// written by an earlier Kiln (the database keeps them) must replay to the same program.
//
// Regenerate only for an intended change of behaviour, and say so in the commit:
//   KILN_UPDATE_GOLDEN=1 build/tests/kiln_search_tests --gtest_filter='SearchGolden.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ir/schedule/schedule.h"
#include "ir/stmt.h"
#include "ir/structural.h"
#include "ops/workload.h"
#include "search/evolutionary.h"
#include "support/sha256.h"
#include "te/te.h"

namespace kiln::search {
namespace {

using nlohmann::json;

const std::string kGoldenDir = std::string(KILN_SOURCE_DIR) + "/tests/search/golden";

bool updating() {
  const char *v = std::getenv("KILN_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

json f32(std::vector<int64_t> shape) { return json{{"dtype", "float32"}, {"shape", shape}}; }

// A dense layer with bias and ReLU, and a padded 3x3 convolution with ReLU: the two
// shapes of work whose rules differ most (packing and accumulators; windows, padding
// and the other-vector-axis variant).
struct GoldenWorkload {
  std::string name;
  json workload;
};

std::vector<GoldenWorkload> golden_workloads() {
  json dense = {{"kiln_workload", 1},
                {"inputs", {f32({128, 768}), f32({768, 768}), f32({768})}},
                {"ops",
                 {{{"op", "dense"}, {"args", {"in0", "in1", "in2"}}, {"attrs", json::object()}},
                  {{"op", "relu"}, {"args", {"op0"}}, {"attrs", json::object()}}}},
                {"outputs", {"op1"}}};
  json conv = {{"kiln_workload", 1},
               {"inputs", {f32({1, 32, 28, 28}), f32({64, 32, 3, 3}), f32({64})}},
               {"ops",
                {{{"op", "conv2d"},
                  {"args", {"in0", "in1", "in2"}},
                  {"attrs", {{"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"groups", 1}}}},
                 {{"op", "relu"}, {"args", {"op0"}}, {"attrs", json::object()}}}},
               {"outputs", {"op1"}}};
  return {{"dense_relu", dense}, {"conv3x3_relu", conv}};
}

// An AVX2 and an AVX-512 machine: lanes, register tiles and innermost caps differ.
std::vector<std::pair<std::string, std::string>> golden_targets() {
  return {{"avx2", "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -num-cores=2"},
          {"avx512", "llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids -num-cores=2"}};
}

ir::PrimFunc lower(const json &workload) { return te::lower(ops::Workload::from_json(workload).build_dag(), "main"); }

std::string digest(const std::string &text) { return support::sha256_hex(text).substr(0, 16); }

// A stand-in for the cost model and for measurements: deterministic, spread over
// (0, 1], and unrelated to the program's speed, which is all a test of the search's
// bookkeeping needs.
double pseudo_score(const ir::PrimFunc &f) { return static_cast<double>(ir::structural_hash(f) % 9973 + 1) / 9973.0; }

std::vector<std::string> read_lines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

void write_lines(const std::string &path, const std::vector<std::string> &lines) {
  std::ofstream out(path);
  for (const std::string &l : lines) out << l << "\n";
}

// Compares line by line so a failure names the first candidate that changed.
void expect_golden(const std::string &file, const std::vector<std::string> &actual) {
  std::string path = kGoldenDir + "/" + file;
  if (updating()) {
    write_lines(path, actual);
    GTEST_SKIP() << "rewrote " << path;
  }
  std::vector<std::string> expected = read_lines(path);
  ASSERT_FALSE(expected.empty()) << path << " is missing; regenerate it with KILN_UPDATE_GOLDEN=1";
  for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i)
    ASSERT_EQ(expected[i], actual[i]) << "first difference at line " << i + 1 << " of " << path;
  EXPECT_EQ(expected.size(), actual.size()) << path;
}

// Candidates of `threads` replay threads (EvolutionOptions::threads).
std::vector<std::string> search_rounds(int threads) {
  std::vector<std::string> lines;
  for (const GoldenWorkload &w : golden_workloads()) {
    ir::PrimFunc func = lower(w.workload);
    for (const auto &[target_name, target_string] : golden_targets()) {
      Target target = Target::parse(target_string);
      std::string label = w.name + " " + target_name;
      std::vector<ir::Trace> sketches = generate_sketches(func, default_rules(target), 3);
      for (size_t i = 0; i < sketches.size(); ++i)
        lines.push_back(label + " sketch " + std::to_string(i) + " " + digest(sketches[i].to_json().dump()));

      EvolutionOptions options;
      options.population = 24;
      options.generations = 2;
      options.threads = threads;
      EvolutionarySearch search(func, default_search_space(target), options, 17);
      Scorer score = [](const std::vector<ir::PrimFunc> &fs) {
        std::vector<double> s;
        for (const ir::PrimFunc &f : fs) s.push_back(pseudo_score(f));
        return s;
      };
      for (int round = 0; round < 3; ++round) {
        std::vector<Candidate> batch = search.next_batch(12, score, round > 0);
        for (size_t i = 0; i < batch.size(); ++i) {
          std::string trace = batch[i].trace.to_json().dump();
          lines.push_back(label + " round " + std::to_string(round) + " " + std::to_string(i) + " " + digest(trace));
          search.add_measured(batch[i].sketch, batch[i].func, trace, pseudo_score(batch[i].func));
        }
      }
    }
  }
  return lines;
}

TEST(SearchGolden, SameSeedGivesTheSameSketchesAndCandidates) {
  std::vector<std::string> one_thread = search_rounds(1);
  expect_golden("search_rounds.txt", one_thread);
  // Replays on several threads draw the same samples and keep their order.
  if (!updating()) {
    EXPECT_EQ(search_rounds(3), one_thread);
  }
}

// The stored traces (JSON Lines: workload, target, trace, digest of the printed program)
// were written by the search before its internals changed; each must replay to the
// program it described then.
TEST(SearchGolden, StoredTracesReplayToTheSamePrograms) {
  std::string path = kGoldenDir + "/stored_traces.jsonl";
  if (updating()) {
    std::vector<std::string> lines;
    for (const GoldenWorkload &w : golden_workloads()) {
      ir::PrimFunc func = lower(w.workload);
      for (const auto &[target_name, target_string] : golden_targets()) {
        EvolutionarySearch search(func, default_search_space(Target::parse(target_string)), EvolutionOptions{}, 23);
        for (const Candidate &c : search.next_batch(6, nullptr, false))
          lines.push_back(json{{"workload", w.workload},
                               {"target", target_string},
                               {"trace", c.trace.to_json()},
                               {"program", digest(ir::to_string(c.func))}}
                              .dump());
      }
    }
    write_lines(path, lines);
    GTEST_SKIP() << "rewrote " << path;
  }
  std::vector<std::string> lines = read_lines(path);
  ASSERT_GE(lines.size(), 20u) << path;
  for (const std::string &line : lines) {
    json record = json::parse(line);
    ir::PrimFunc func = lower(record.at("workload"));
    ir::Schedule replayed = ir::Schedule::replay(func, ir::Trace::from_json(record.at("trace")));
    EXPECT_EQ(digest(ir::to_string(replayed.func())), record.at("program").get<std::string>()) << line.substr(0, 200);
    // Written again, the trace says the same.
    EXPECT_EQ(replayed.trace().to_json(), ir::Trace::from_json(record.at("trace")).to_json());
  }
}

}  // namespace
}  // namespace kiln::search
