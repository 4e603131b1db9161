// The tuning loop on real builds and measurements: it finds valid programs, stores
// them, resumes from the database without measuring any program twice, and the search
// is deterministic for a seed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "costmodel/xgb_model.h"
#include "ir/schedule/instruction_kind.h"
#include "measure/local_builder_pool.h"
#include "measure/local_runner.h"
#include "scheduler/measured_programs.h"
#include "scheduler/task_tuner.h"
#include "search/evolutionary.h"
#include "te/te.h"
#include "tests/scheduler/test_runner.h"

namespace kiln::scheduler {
namespace {

namespace fs = std::filesystem;

const auto *const kEarlyRunner = &test_runner();
measure::LocalRunner &runner() { return test_runner(); }

ops::Workload small_dense() {
  return ops::Workload::single("dense", {{{16, 32}, ir::DType::kFloat32}, {{24, 32}, ir::DType::kFloat32}});
}

TuneOptions quick_options(uint64_t seed) {
  TuneOptions o;
  o.trials = 24;
  o.batch = 8;
  o.seed = seed;
  o.evolution.population = 32;
  o.evolution.generations = 1;
  o.timing.repeat = 2;
  o.timing.min_repeat_ms = 1;
  o.confirm_top = 0;  // the single measurements decide (ConfirmationRetimesTheFastest tests it)
  return o;
}

// A database and a builder pool in a fresh directory of the test's own, removed after it.
class TaskTunerTest : public ::testing::Test {
 protected:
  TaskTunerTest()
      : dir(fresh_dir()),
        database(db::Database::open(dir / "tune.db", db::OpenMode::kCreate)),
        pool(2, dir / "work", 60.0) {}
  ~TaskTunerTest() override { fs::remove_all(dir); }

  static fs::path fresh_dir() {
    fs::path d = fs::temp_directory_path() / ("kiln_tuner_test_" + std::to_string(getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(d);
    return d;
  }

  fs::path dir;
  Target target = Target::parse("llvm -mcpu=native -num-cores=2");
  db::Database database;
  measure::LocalBuilderPool pool;
};

TEST_F(TaskTunerTest, FindsValidProgramsAndResumesWithoutRemeasuring) {
  costmodel::XGBoostCostModel model;

  TaskTuner first(small_dense(), target, quick_options(1), &database, pool, runner(), model);
  TuneResult r1 = first.run();
  EXPECT_EQ(r1.progress.trials, 24);
  EXPECT_GT(r1.progress.best_seconds, 0) << "no valid candidate among 24";
  EXPECT_LT(r1.progress.errors, 24);
  ASSERT_EQ(r1.best_gflops_curve.size(), 24u);
  EXPECT_TRUE(std::is_sorted(r1.best_gflops_curve.begin(), r1.best_gflops_curve.end()));

  // A second run on the same database continues: new programs only.
  costmodel::XGBoostCostModel model2;
  TaskTuner second(small_dense(), target, quick_options(2), &database, pool, runner(), model2);
  TuneResult r2 = second.run();
  EXPECT_GT(r2.progress.trials, 0);
  EXPECT_LE(r2.progress.best_seconds, r1.progress.best_seconds) << "the resumed best was lost";
  std::vector<db::Record> all = database.records_of(small_dense().key_hash());
  EXPECT_EQ(static_cast<int64_t>(all.size()), r1.progress.trials + r2.progress.trials);
  std::set<std::string> traces;
  for (const db::Record &rec : all) traces.insert(rec.trace_json);
  EXPECT_EQ(traces.size(), all.size()) << "a program was measured twice";
}

// The measurements of a tracker whose runners drop off: the real local runner's results,
// the first `lost` of them replaced by what a lost runner reports (RUNNER_LOST becomes
// ErrorKind::kInfrastructure in rpc::RemoteRunner).
// A task's first batch measures the untuned default: tuning ends no slower than it.
TEST_F(TaskTunerTest, TheFirstBatchMeasuresTheUntunedDefault) {
  costmodel::XGBoostCostModel model;
  TuneOptions options = quick_options(4);
  options.trials = 8;
  TaskTuner tuner(small_dense(), target, options, &database, pool, runner(), model);
  tuner.run();
  ir::PrimFunc func = te::lower(small_dense().build_dag(), "dense");
  std::optional<ir::Trace> untuned = search::untuned_trace(func, target);
  ASSERT_TRUE(untuned.has_value());
  bool measured = false;
  for (const db::Record &r : database.records_of(small_dense().key_hash()))
    measured = measured || ir::Trace::from_json(nlohmann::json::parse(r.trace_json)).to_json() == untuned->to_json();
  EXPECT_TRUE(measured);
}

class RunnersLostOnTheWay : public measure::Runner {
 public:
  explicit RunnersLostOnTheWay(int lost) : lost_(lost) {}
  std::vector<measure::RunResult> run(const std::vector<measure::RunInput> &batch) override {
    std::vector<measure::RunResult> results = runner().run(batch);
    for (measure::RunResult &r : results) {
      if (lost_ <= 0) break;
      --lost_;
      r = measure::RunResult{};
      r.error = measure::ErrorKind::kInfrastructure;
      r.message = "RUNNER_LOST: the runner stopped answering";
    }
    return results;
  }

 private:
  int lost_;
};

// A measurement the infrastructure failed is not the program's failure: nothing is
// stored for it, the cost model does not learn from it, and the program is measured
// again in a later round.
TEST_F(TaskTunerTest, InfrastructureFailuresAreRetriedNotStored) {
  costmodel::XGBoostCostModel model;
  RunnersLostOnTheWay flaky(5);
  TaskTuner tuner(small_dense(), target, quick_options(3), &database, pool, flaky, model);
  TuneResult r = tuner.run();
  EXPECT_EQ(r.progress.trials, 24);
  EXPECT_EQ(r.progress.infrastructure_failures, 5);
  std::vector<db::Record> all = database.records_of(small_dense().key_hash());
  EXPECT_EQ(all.size(), 19u) << "the 5 lost measurements were stored";
  for (const db::Record &rec : all)
    if (!rec.ok()) {
      EXPECT_NE(rec.error().kind, measure::ErrorKind::kInfrastructure) << rec.error().message;
    }
  std::set<std::string> stored;
  for (const db::Record &rec : all) stored.insert(rec.trace_json);
  EXPECT_EQ(stored.size(), all.size()) << "a program was stored twice";
  // The first batch is the seed's, whatever happens to it: the same job without losses
  // measures it first. Every program of it, the five lost ones too, ended up stored.
  db::Database clean = db::Database::open(dir / "clean.db", db::OpenMode::kCreate);
  costmodel::XGBoostCostModel clean_model;
  TuneOptions first_batch = quick_options(3);
  first_batch.trials = 8;
  TaskTuner reference(small_dense(), target, first_batch, &clean, pool, runner(), clean_model);
  reference.run();
  std::vector<db::Record> first = clean.records_of(small_dense().key_hash());
  ASSERT_EQ(first.size(), 8u);
  for (const db::Record &rec : first)
    EXPECT_EQ(stored.count(rec.trace_json), 1u) << "a lost program was never measured";
}

// Two boards under one key: the round's measurements come from runner "a", the
// re-timings from "b", three times slower (a board that is not what the key says).
class TwoBoards : public measure::Runner {
 public:
  std::vector<measure::RunResult> run(const std::vector<measure::RunInput> &batch) override {
    for (const measure::RunInput &input : batch) avoided.insert(input.avoid_runner);
    std::vector<measure::RunResult> results = runner().run(batch);
    const bool first = calls_++ == 0;
    for (measure::RunResult &r : results) {
      r.measured_by = first ? R"({"runner":"a"})" : R"({"runner":"b"})";
      if (!first)
        for (double &s : r.repeat_seconds) s *= 3;
    }
    return results;
  }
  std::set<std::string> avoided;

 private:
  int calls_ = 0;
};

// One board, "a": every measurement and re-timing is its own.
class BoardA : public measure::Runner {
 public:
  std::vector<measure::RunResult> run(const std::vector<measure::RunInput> &batch) override {
    std::vector<measure::RunResult> results = runner().run(batch);
    for (measure::RunResult &r : results) r.measured_by = R"({"runner":"a"})";
    return results;
  }
};

// The end-of-run re-timing goes to another runner of the key than the one that first
// measured a program, and a disagreement beyond noise is reported, not silently stored.
TEST_F(TaskTunerTest, ReTimingsOnAnotherRunnerThatDisagreeAreReported) {
  costmodel::XGBoostCostModel model;
  TwoBoards boards;
  TuneOptions options = quick_options(5);
  options.trials = 8;
  options.confirm_top = 3;
  options.confirm_runs = 2;
  TaskTuner tuner(small_dense(), target, options, &database, pool, boards, model);
  TuneResult r = tuner.run();
  EXPECT_TRUE(boards.avoided.count("a")) << "the re-timings did not ask to avoid the first runner";
  ASSERT_GE(r.confirmed, 2);
  ASSERT_FALSE(r.disagreements.empty());
  for (const std::string &line : r.disagreements) {
    EXPECT_NE(line.find("on runner a was re-timed"), std::string::npos) << line;
    EXPECT_NE(line.find(" on b ("), std::string::npos) << line;
  }
  // Where a record's timings come from is stored with it.
  std::set<std::string> disputed;
  for (const db::Record &rec : database.records_of(small_dense().key_hash())) {
    if (rec.ok()) {
      EXPECT_EQ(rec.metadata.measured_by.value("runner", ""), "a");
      if (!rec.metadata.disputed.empty()) {
        EXPECT_NE(rec.metadata.disputed.find("on runner a was re-timed"), std::string::npos) << rec.metadata.disputed;
        EXPECT_FALSE(rec.confirmed_latency) << "a disputed figure was stored as confirmed";
        disputed.insert(rec.trace_json);
      }
    }
  }
  // Disputed figures are stored so, counted by stats, and never ranked.
  EXPECT_EQ(disputed.size(), r.disagreements.size());
  EXPECT_EQ(database.stats().disputed, static_cast<int64_t>(disputed.size()));
  for (const db::Record &rec : database.top_k(small_dense().key_hash(), target.str(), 100))
    EXPECT_EQ(disputed.count(rec.trace_json), 0u) << "a disputed record was ranked";
  // A later job's confirmation re-times them on the key's runners and settles them.
  costmodel::XGBoostCostModel again_model;
  TuneOptions again = options;
  again.trials = 8;
  BoardA board;
  TaskTuner settle(small_dense(), target, again, &database, pool, board, again_model);
  settle.run();
  EXPECT_EQ(database.stats().disputed, 0);
  for (const db::Record &rec : database.records_of(small_dense().key_hash())) {
    if (disputed.count(rec.trace_json)) EXPECT_TRUE(rec.confirmed_latency) << "a disputed program was not re-timed";
    EXPECT_EQ(rec.metadata.disputed, "") << "still disputed: " << rec.trace_json.substr(0, 80)
                                         << (disputed.count(rec.trace_json) ? " (disputed by the first job)" : "");
  }
}

// Timed with every buffer evicted before each call, records say so; their latencies are
// not on the hot protocol's scale, so a database never mixes the two for one task.
TEST_F(TaskTunerTest, EvictedBufferTimingsAreMarkedAndNeverRankedWithHotOnes) {
  TuneOptions cold = quick_options(4);
  cold.trials = 16;
  cold.timing.flush_args = true;
  costmodel::XGBoostCostModel model;
  TuneResult r = TaskTuner(small_dense(), target, cold, &database, pool, runner(), model).run();
  EXPECT_GT(r.progress.best_seconds, 0);
  std::vector<db::Record> records = database.records_of(small_dense().key_hash());
  ASSERT_EQ(records.size(), 16u);
  for (const db::Record &rec : records) EXPECT_TRUE(timed_with_flushed_args(rec)) << rec.metadata.to_json().dump();

  costmodel::XGBoostCostModel hot_model;
  TuneOptions hot = quick_options(5);
  try {
    TaskTuner(small_dense(), target, hot, &database, pool, runner(), hot_model).run();
    ADD_FAILURE() << "hot timings were added to a task timed with evicted buffers";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("--flush-args"), std::string::npos) << e.what();
  }
  EXPECT_EQ(database.records_of(small_dense().key_hash()).size(), 16u) << "records were added or lost";

  // The same protocol resumes.
  costmodel::XGBoostCostModel again;
  cold.seed = 6;
  TuneResult resumed = TaskTuner(small_dense(), target, cold, &database, pool, runner(), again).run();
  EXPECT_LE(resumed.progress.best_seconds, r.progress.best_seconds);
  EXPECT_EQ(database.records_of(small_dense().key_hash()).size(), 32u);
}

// A rule that unrolls every loop of a 256^3 matrix product: code generation refuses
// each candidate at once (16.8 million statements), and the tuner records build errors
// and carries on instead of waiting out a build timeout per candidate or crashing.
class UnrollEveryLoop : public search::ScheduleRule {
 public:
  std::string name() const override { return "unroll_every_loop"; }
  std::vector<ir::Schedule> apply(ir::Schedule sch, const std::string &block) const override {
    for (const ir::LoopRV &l : sch.get_loops(sch.get_block(block))) sch.unroll(l);
    return search::only(std::move(sch));
  }
};

TEST_F(TaskTunerTest, CandidatesUnrolledPastTheBoundAreBuildErrors) {
  ops::Workload w =
      ops::Workload::single("matmul", {{{256, 256}, ir::DType::kFloat32}, {{256, 256}, ir::DType::kFloat32}});
  TuneOptions options = quick_options(7);
  options.trials = 4;
  options.batch = 4;
  options.space = search::SearchSpace{{std::make_shared<UnrollEveryLoop>()}, {}, {}};
  costmodel::XGBoostCostModel model;
  TuneResult r = TaskTuner(w, target, options, &database, pool, runner(), model).run();
  EXPECT_GE(r.progress.trials, 1);
  EXPECT_EQ(r.progress.errors, r.progress.trials);
  EXPECT_EQ(r.progress.best_seconds, 0);
  std::vector<db::Record> records = database.records_of(w.key_hash());
  ASSERT_FALSE(records.empty());
  for (const db::Record &rec : records) {
    ASSERT_FALSE(rec.ok());
    EXPECT_EQ(rec.error().kind, measure::ErrorKind::kBuildError) << rec.error().message;
    EXPECT_NE(rec.error().message.find("unrolling loops i (256), j (256), rk (256)"), std::string::npos)
        << rec.error().message;
  }
}

// With the weights a constant of the workload, programs that copy them into panels
// are measured with the panels packed ahead of time (kiln_prepack, untimed): they pass
// the check against the reference, and their records say which layout they read.
TEST_F(TaskTunerTest, ConstantWeightsAreMeasuredPackedAheadOfTime) {
  ops::Workload w = small_dense();
  w.inputs[1].constant = true;
  costmodel::XGBoostCostModel model;
  TuneOptions options = quick_options(3);
  options.trials = 32;
  TaskTuner tuner(w, target, options, &database, pool, runner(), model);
  EXPECT_GT(tuner.run().progress.best_seconds, 0);
  int packed = 0;
  for (const db::Record &rec : database.records_of(w.key_hash())) {
    nlohmann::json layouts = rec.metadata.packed_inputs;
    if (layouts.empty()) continue;
    ++packed;
    EXPECT_TRUE(rec.ok()) << rec.trace_json;
    EXPECT_EQ(layouts[0]["input"], 1);
    EXPECT_GE(layouts[0]["shape"].size(), 2u);
  }
  EXPECT_GT(packed, 0) << "no program among 32 packed the weights";
}

// The confirmation re-times the fastest programs side by side and picks the best of
// them by median; the database keeps the first measurements (records are facts) and
// stores the medians as confirmed latencies, which its lookups rank first.
TEST_F(TaskTunerTest, ConfirmationRetimesTheFastest) {
  costmodel::XGBoostCostModel model;
  TuneOptions o = quick_options(3);
  o.confirm_top = 4;
  o.confirm_runs = 2;
  TaskTuner tuner(small_dense(), target, o, &database, pool, runner(), model);
  TuneResult r = tuner.run();
  EXPECT_EQ(r.confirmed, 4);
  EXPECT_GT(r.progress.best_seconds, 0);
  // The four re-timed programs are stored as confirmed (their first measurements kept),
  // and the database's best is the one the tuner chose.
  std::vector<db::Record> top = database.top_k(small_dense().key_hash(), target.str(), 5);
  ASSERT_GE(top.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(top[i].confirmed_latency) << "rank " << i;
  if (top.size() > 4) {
    EXPECT_FALSE(top[4].confirmed_latency);
  }
  EXPECT_EQ(top[0].trace_json, r.best_trace_json);
  EXPECT_DOUBLE_EQ(*top[0].confirmed_latency, r.progress.best_seconds);
  EXPECT_EQ(static_cast<int64_t>(database.records_of(small_dense().key_hash()).size()), r.progress.trials);

  // A resumed run confirms again: its batch holds the incumbent beside the programs its
  // measurements rank first, and only that batch's figures stay confirmed.
  costmodel::XGBoostCostModel model2;
  TuneOptions more = quick_options(4);
  more.trials = 16;
  more.confirm_top = 4;
  more.confirm_runs = 2;
  TuneResult again = TaskTuner(small_dense(), target, more, &database, pool, runner(), model2).run();
  EXPECT_GE(again.confirmed, 4);
  int confirmed = 0;
  bool incumbent_retimed = false;
  for (const db::Record &rec : database.records_of(small_dense().key_hash())) {
    if (!rec.confirmed_latency) continue;
    ++confirmed;
    incumbent_retimed = incumbent_retimed || rec.trace_json == r.best_trace_json;
  }
  EXPECT_EQ(confirmed, again.confirmed);
  EXPECT_TRUE(incumbent_retimed);
  EXPECT_EQ(database.best(small_dense().key_hash(), target.str())->trace_json, again.best_trace_json);
}

// Every round from the third re-times the best program beside its candidates (the
// second re-times the first round's best to set the task's scale): records keep their
// raw timings and store the anchor's ratio, and the best and the labels are the
// latencies divided by it. Without anchoring, records carry no ratio.
TEST_F(TaskTunerTest, RoundsAreScaledByTheAnchorReTimedBesideThem) {
  costmodel::XGBoostCostModel model;
  TuneOptions o = quick_options(5);
  o.trials = 32;  // four rounds of 8
  o.anchor_rounds = true;
  TuneResult r = TaskTuner(small_dense(), target, o, &database, pool, runner(), model).run();
  ASSERT_GT(r.progress.best_seconds, 0);
  EXPECT_EQ(r.progress.anchored_rounds, 2);
  std::vector<db::Record> records = database.records_of(small_dense().key_hash());
  ASSERT_EQ(records.size(), 32u);
  double best_label = 0;
  double best_mean_label = 0;
  int with_ratio = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const db::Record &rec = records[i];
    double ratio = rec.metadata.anchor_ratio;
    EXPECT_EQ(ratio > 0, i >= 16) << "record " << i;
    if (ratio > 0) ++with_ratio;
    if (!rec.ok()) continue;
    // The best competes on the anchored mean; the cost model learns the fastest repeat.
    double mean = label_latency(rec, LatencyLabel::kAnchoredMean);
    EXPECT_NEAR(mean, ratio > 0 ? rec.mean_latency() / ratio : rec.mean_latency(), 1e-12 * mean);
    double fastest = *std::min_element(rec.latencies().begin(), rec.latencies().end());
    double label = label_latency(rec);
    EXPECT_NEAR(label, ratio > 0 ? fastest / ratio : fastest, 1e-12 * label);
    EXPECT_LE(label, mean * (1 + 1e-12));
    if (best_mean_label == 0 || mean < best_mean_label) best_mean_label = mean;
    if (best_label == 0 || label < best_label) best_label = label;
  }
  EXPECT_EQ(with_ratio, 16);
  EXPECT_NEAR(r.progress.best_seconds, best_mean_label, 1e-12 * best_mean_label);
  EXPECT_NEAR(r.progress.last_anchor_ratio, records.back().metadata.anchor_ratio, 1e-12);

  // The loader gives the labels, or the raw means when asked.
  LoadOptions raw;
  raw.labels = LatencyLabel::kMeasuredMean;
  MeasuredPrograms labelled = load_measured_programs(database, target.str());
  MeasuredPrograms measured = load_measured_programs(database, target.str(), raw);
  ASSERT_FALSE(labelled.latencies.empty());
  EXPECT_NEAR(*std::min_element(labelled.latencies.begin(), labelled.latencies.end()), best_label, 1e-12 * best_label);
  double best_mean = 0;
  for (const db::Record &rec : records)
    if (rec.ok() && (best_mean == 0 || rec.mean_latency() < best_mean)) best_mean = rec.mean_latency();
  EXPECT_NEAR(*std::min_element(measured.latencies.begin(), measured.latencies.end()), best_mean, 1e-12 * best_mean);

  ops::Workload other =
      ops::Workload::single("dense", {{{8, 32}, ir::DType::kFloat32}, {{24, 32}, ir::DType::kFloat32}});
  costmodel::XGBoostCostModel model2;
  o.anchor_rounds = false;
  TuneResult plain = TaskTuner(other, target, o, &database, pool, runner(), model2).run();
  EXPECT_EQ(plain.progress.anchored_rounds, 0);
  for (const db::Record &rec : database.records_of(other.key_hash())) EXPECT_EQ(rec.metadata.anchor_ratio, 0);
}

// A task warm-starts its cost model from the other workloads' records (not its own),
// and the loader's per-task cap keeps the best and the worst of a task.
TEST_F(TaskTunerTest, WarmStartTrainsOnOtherWorkloadsOnly) {
  costmodel::XGBoostCostModel model;
  TuneResult dense = TaskTuner(small_dense(), target, quick_options(1), &database, pool, runner(), model).run();
  size_t dense_ok = dense.best_gflops_curve.size() - static_cast<size_t>(dense.progress.errors);
  ASSERT_GT(dense_ok, 2u);

  ops::Workload matmul =
      ops::Workload::single("matmul", {{{16, 16}, ir::DType::kFloat32}, {{16, 16}, ir::DType::kFloat32}});
  TuneOptions warm = quick_options(3);
  warm.trials = 8;
  warm.warm_start = true;
  costmodel::XGBoostCostModel warm_model;
  TuneResult r = TaskTuner(matmul, target, warm, &database, pool, runner(), warm_model).run();
  EXPECT_EQ(r.progress.warm_start_programs, static_cast<int64_t>(dense_ok));
  // Tuned again with warm start, the matmul's own records stay out of the warm start.
  costmodel::XGBoostCostModel again_model;
  TuneResult again = TaskTuner(matmul, target, warm, &database, pool, runner(), again_model).run();
  EXPECT_EQ(again.progress.warm_start_programs, static_cast<int64_t>(dense_ok));

  LoadOptions capped;
  capped.max_per_task = 3;
  capped.skip_workload = matmul.key_hash();
  capped.labels = LatencyLabel::kAnchoredMean;  // what the best is chosen by
  MeasuredPrograms some = load_measured_programs(database, target.str(), capped);
  ASSERT_EQ(some.programs.size(), 3u);
  double best = *std::min_element(some.latencies.begin(), some.latencies.end());
  EXPECT_EQ(best, dense.progress.best_seconds);  // the sample holds the task's best
  EXPECT_LT(best, *std::max_element(some.latencies.begin(), some.latencies.end()));
}

TEST(EvolutionarySearch, SameSeedSameBatches) {
  ops::Workload w = ops::Workload::single("matmul", {{{32, 32}, ir::DType::kFloat32}, {{32, 32}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2");
  // A deterministic stand-in score: fewer loops first (any fixed function will do).
  search::Scorer score = [](const std::vector<ir::PrimFunc> &fs) {
    std::vector<double> s;
    for (const ir::PrimFunc &f : fs) s.push_back(-static_cast<double>(ir::to_string(f).size()));
    return s;
  };
  auto run = [&](uint64_t seed) {
    search::EvolutionOptions o;
    o.population = 24;
    o.generations = 2;
    search::EvolutionarySearch s(func, search::default_search_space(target), o, seed);
    std::vector<std::string> out;
    for (int round = 0; round < 3; ++round) {
      for (const search::Candidate &c : s.next_batch(6, score, /*model_ready=*/round > 0)) {
        out.push_back(c.trace.to_json().dump());
        s.add_measured(c.sketch, c.func, out.back(), 1.0);
      }
    }
    return out;
  };
  std::vector<std::string> a = run(5), b = run(5), c = run(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::set<std::string>(a.begin(), a.end()).size(), a.size()) << "a batch repeated a program";
}

// A model that ranks the measured programs above everything else makes the population
// converge on them (the seeds and re-derivations of them); the batch must still hold
// new programs while the space has any, or tuning ends as if it were exhausted.
TEST(EvolutionarySearch, ConvergedPopulationsStillYieldNewPrograms) {
  ops::Workload w = ops::Workload::single("matmul", {{{32, 32}, ir::DType::kFloat32}, {{32, 32}, ir::DType::kFloat32}});
  ir::PrimFunc func = te::lower(w.build_dag(), "matmul");
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2");
  std::set<std::string> measured;
  search::Scorer favour_measured = [&](const std::vector<ir::PrimFunc> &fs) {
    std::vector<double> s;
    for (const ir::PrimFunc &f : fs) s.push_back(measured.count(ir::to_string(f)) ? 1.0 : 0.0);
    return s;
  };
  search::EvolutionOptions o;
  o.population = 8;
  o.generations = 2;
  o.init_measured = 8;
  search::EvolutionarySearch s(func, search::default_search_space(target), o, 3);
  std::set<std::string> traces;
  for (int round = 0; round < 4; ++round) {
    std::vector<search::Candidate> batch = s.next_batch(8, favour_measured, /*model_ready=*/round > 0);
    EXPECT_EQ(batch.size(), 8u) << "round " << round;
    for (const search::Candidate &c : batch) {
      std::string trace = c.trace.to_json().dump();
      EXPECT_TRUE(traces.insert(trace).second) << "a program was proposed twice";
      measured.insert(ir::to_string(c.func));
      s.add_measured(c.sketch, c.func, trace, 1.0);
    }
  }
}

// The decisions of the tiling instructions, in order.
std::vector<nlohmann::json> tiling_decisions(const ir::Trace &t) {
  std::vector<nlohmann::json> out;
  for (const auto &[index, decision] : t.decisions) {
    const ir::InstructionKind *kind = t.instructions[index].kind;
    if (kind == &ir::instructions::kSamplePerfectTile || kind == &ir::instructions::kSampleTile)
      out.push_back(decision);
  }
  return out;
}

// A program of the plain matmul carries its decisions over to the matmul + ReLU search
// (its sketches sample the same way, one block more) and heads its next batch; a search
// that samples differently, or one that adopts nothing, refuses it.
TEST(EvolutionarySearch, SiblingProgramsAreAdoptedWithTheirDecisions) {
  auto f32 = [](std::vector<int64_t> shape) { return nlohmann::json{{"dtype", "float32"}, {"shape", shape}}; };
  auto workload = [&](bool relu) {
    nlohmann::json ops = {{{"op", "matmul"}, {"args", {"in0", "in1"}}, {"attrs", nlohmann::json::object()}}};
    if (relu) ops.push_back({{"op", "relu"}, {"args", {"op0"}}, {"attrs", nlohmann::json::object()}});
    return ops::Workload::from_json({{"kiln_workload", 1},
                                     {"inputs", {f32({32, 48}), f32({48, 64})}},
                                     {"ops", ops},
                                     {"outputs", {relu ? "op1" : "op0"}}});
  };
  Target target = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -num-cores=2");
  search::EvolutionOptions o;
  o.population = 16;
  o.generations = 1;
  search::EvolutionarySearch plain(te::lower(workload(false).build_dag(), "mm"), search::default_search_space(target),
                                   o, 1);
  search::EvolutionarySearch with_relu(te::lower(workload(true).build_dag(), "mm_relu"),
                                       search::default_search_space(target), o, 2);
  std::vector<search::Candidate> offered = plain.next_batch(8, {}, false);
  ASSERT_FALSE(offered.empty());
  int taken = 0;
  std::vector<std::vector<nlohmann::json>> offered_decisions;
  for (const search::Candidate &c : offered) {
    bool adopted = with_relu.adopt(c.sketch);
    taken += adopted;
    if (adopted) offered_decisions.push_back(tiling_decisions(c.sketch));
  }
  EXPECT_GT(taken, 0) << "no sketch of matmul + ReLU samples like the plain matmul's";
  std::vector<search::Candidate> batch = with_relu.next_batch(8, {}, false);
  ASSERT_FALSE(batch.empty());
  // The newest offer comes first with its tilings (the ReLU's own annotations are sampled).
  EXPECT_TRUE(batch[0].adopted);
  EXPECT_EQ(tiling_decisions(batch[0].sketch), offered_decisions.back());
  EXPECT_TRUE(batch[0].func.body.defined());
  int adopted_in_batch = 0;
  for (const search::Candidate &c : batch) adopted_in_batch += c.adopted;
  EXPECT_EQ(adopted_in_batch, std::min(taken, o.max_adopted));
  // Taken once: the next batch is the search's own.
  for (const search::Candidate &c : with_relu.next_batch(8, {}, false)) EXPECT_FALSE(c.adopted);

  ops::Workload pool =
      ops::Workload::single("max_pool2d", {{{1, 8, 16, 16}, ir::DType::kFloat32}}, {{"kernel", {3, 3}}});
  search::EvolutionarySearch pooling(te::lower(pool.build_dag(), "pool"), search::default_search_space(target), o, 3);
  EXPECT_FALSE(pooling.adopt(offered[0].sketch));
  o.max_adopted = 0;
  search::EvolutionarySearch closed(te::lower(workload(true).build_dag(), "mm_relu"),
                                    search::default_search_space(target), o, 2);
  EXPECT_FALSE(closed.adopt(offered[0].sketch));
}

}  // namespace
}  // namespace kiln::scheduler
