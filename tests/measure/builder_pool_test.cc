// The local builder pool with the real compiler, and its artifacts through the runner.
#include "measure/local_builder_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "ir/schedule/schedule.h"
#include "measure/local_runner.h"
#include "ops/workload.h"
#include "test_util.h"

namespace kiln::measure {
namespace {

using testing::TempDir;
using testing::test_runner_options;

ir::PrimFunc dense_program() {
  ops::Workload w = ops::Workload::single("dense", {{{16, 32}, ir::DType::kFloat32}, {{24, 32}, ir::DType::kFloat32}});
  return te::lower(w.build_dag());
}

// The dense program with its outermost loop split by `factor`: same result, different code.
ir::PrimFunc split_program(int64_t factor) {
  ir::Schedule sch(dense_program());
  ir::BlockRV block = sch.get_block(sch.block_names().front());
  std::vector<ir::LoopRV> loops = sch.get_loops(block);
  sch.split(loops.front(), {ir::Factor(int64_t{-1}), ir::Factor(factor)});
  return sch.func();
}

Target host_target() { return Target::parse("llvm -num-cores=2"); }

LocalBuilderOptions pool_options(const TempDir &dir) {
  LocalBuilderOptions options;
  options.num_workers = 2;
  options.work_dir = dir.path() / "artifacts";
  options.build_timeout_seconds = 60;
  options.lock_path = dir.path() / "measure.lock";
  return options;
}

TEST(LocalBuilderPool, BuildsABatchWithTwoWorkersAndTheArtifactsRunCorrectly) {
  TempDir dir;
  LocalRunner runner(test_runner_options(dir));  // first: it forks before the pool's threads exist
  LocalBuilderPool pool(pool_options(dir));
  std::vector<BuildInput> batch = {{dense_program(), host_target(), "reference"},
                                   {split_program(2), host_target(), "split2"},
                                   {split_program(4), host_target(), "split4"},
                                   {split_program(8), host_target(), "split8"}};
  std::vector<BuildResult> built = pool.build(batch);
  ASSERT_EQ(built.size(), batch.size());
  for (size_t i = 0; i < built.size(); ++i) {
    ASSERT_TRUE(built[i].ok()) << batch[i].name << ": " << to_string(built[i].error) << ": " << built[i].message;
    EXPECT_EQ(built[i].artifact_path, (dir.path() / "artifacts" / (batch[i].name + ".so")).string());
    EXPECT_TRUE(std::filesystem::exists(built[i].artifact_path));
    EXPECT_GT(built[i].build_seconds, 0);
  }
  for (size_t i = 1; i < built.size(); ++i) {
    RunInput input = testing::quick_input(built[i].artifact_path, built[0].artifact_path);
    RunResult result = runner.run_one(input);
    EXPECT_TRUE(result.ok()) << batch[i].name << ": " << to_string(result.error) << ": " << result.message;
  }
  // A second batch reuses the same workers.
  std::vector<BuildResult> again = pool.build({{split_program(3), host_target(), "split3"}});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].ok()) << again[0].message;
}

TEST(LocalBuilderPool, AProgramTheCodegenRejectsIsABuildError) {
  TempDir dir;
  LocalBuilderPool pool(pool_options(dir));
  std::vector<BuildResult> built = pool.build(
      {{dense_program(), Target::parse("cuda -arch=sm_90"), "gpu"}, {dense_program(), host_target(), "cpu"}});
  ASSERT_EQ(built.size(), 2u);
  EXPECT_EQ(built[0].error, ErrorKind::kBuildError);
  EXPECT_NE(built[0].message.find("codegen rejected the program"), std::string::npos) << built[0].message;
  EXPECT_NE(built[0].message.find("'gpu'"), std::string::npos) << built[0].message;
  EXPECT_TRUE(built[0].artifact_path.empty());
  EXPECT_TRUE(built[1].ok()) << built[1].message;
}

// A program unrolled past the code generator's bound (all three loops of a 256^3
// matrix product) is a build error at once, not a build the timeout has to kill.
TEST(LocalBuilderPool, AProgramUnrolledPastTheBoundIsABuildErrorNamingTheLoops) {
  TempDir dir;
  LocalBuilderOptions options = pool_options(dir);
  options.num_workers = 1;
  LocalBuilderPool pool(options);
  ops::Workload w =
      ops::Workload::single("matmul", {{{256, 256}, ir::DType::kFloat32}, {{256, 256}, ir::DType::kFloat32}});
  ir::Schedule sch(te::lower(w.build_dag()));
  for (const ir::LoopRV &l : sch.get_loops(sch.get_block("matmul"))) sch.unroll(l);
  std::vector<BuildResult> built = pool.build({{sch.func(), host_target(), "unrolled"}});
  ASSERT_EQ(built.size(), 1u);
  EXPECT_EQ(built[0].error, ErrorKind::kBuildError) << to_string(built[0].error) << ": " << built[0].message;
  EXPECT_NE(built[0].message.find("unrolling loops i (256), j (256), rk (256)"), std::string::npos) << built[0].message;
  EXPECT_TRUE(built[0].artifact_path.empty());
}

// A pool whose folder is NAME_PID (kiln tune's /tmp/kiln_tune_PID) removes the
// folders beside it of processes that are gone, and nothing else.
TEST(LocalBuilderPool, RemovesTheWorkFoldersOfProcessesThatAreGone) {
  TempDir dir;
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string dead = std::to_string(gone), live = std::to_string(getppid());
  for (const std::string &name : {"kiln_tune_" + dead, "kiln_tune_" + live, "kiln_tune_models_" + dead,
                                  "kiln_measure_" + dead, "kiln_tune_x" + dead}) {
    std::filesystem::create_directories(dir.path() / name / "sub");
    std::ofstream(dir.path() / name / "sub" / "candidate.so") << "x";
  }
  LocalBuilderOptions options = pool_options(dir);
  options.num_workers = 1;
  options.work_dir = dir.path() / ("kiln_tune_" + std::to_string(getpid()));
  LocalBuilderPool pool(options);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / ("kiln_tune_" + dead)));
  for (const std::string &kept :
       {"kiln_tune_" + live, "kiln_tune_models_" + dead, "kiln_measure_" + dead, "kiln_tune_x" + dead})
    EXPECT_TRUE(std::filesystem::exists(dir.path() / kept / "sub" / "candidate.so")) << kept;
  EXPECT_TRUE(std::filesystem::is_directory(options.work_dir));
  // A folder not named after this process is left alone, whatever is beside it.
  EXPECT_EQ(remove_stale_work_dirs(dir.path() / "artifacts"), 0u);
}

TEST(LocalBuilderPool, ABuildPastTheTimeoutIsKilledAndLeavesNoArtifact) {
  TempDir dir;
  LocalBuilderOptions options = pool_options(dir);
  options.build_timeout_seconds = 0.001;  // no LLVM build finishes in 1 ms
  LocalBuilderPool pool(options);
  std::vector<BuildResult> built = pool.build({{dense_program(), host_target(), "slow"}});
  ASSERT_EQ(built.size(), 1u);
  EXPECT_EQ(built[0].error, ErrorKind::kBuildTimeout) << built[0].message;
  EXPECT_NE(built[0].message.find("build timeout"), std::string::npos) << built[0].message;
  EXPECT_TRUE(std::filesystem::is_empty(options.work_dir));
}

TEST(LocalBuilderPool, InThreadBuildsGiveTheSameResults) {
  TempDir dir;
  LocalBuilderOptions options = pool_options(dir);
  options.isolate_builds = false;
  LocalBuilderPool pool(options);
  std::vector<BuildResult> built =
      pool.build({{dense_program(), host_target(), "a"}, {dense_program(), Target::parse("cuda -arch=sm_90"), "b"}});
  EXPECT_TRUE(built[0].ok()) << built[0].message;
  EXPECT_EQ(built[1].error, ErrorKind::kBuildError);
}

TEST(LocalBuilderPool, SameNamesInOneBatchDoNotOverwriteEachOther) {
  TempDir dir;
  LocalBuilderPool pool(pool_options(dir));
  std::vector<BuildResult> built = pool.build({{dense_program(), host_target(), "same"},
                                               {split_program(2), host_target(), "same"},
                                               {split_program(4), host_target(), "../escape"}});
  ASSERT_TRUE(built[0].ok() && built[1].ok() && built[2].ok());
  EXPECT_NE(built[0].artifact_path, built[1].artifact_path);
  EXPECT_EQ(std::filesystem::path(built[2].artifact_path).parent_path(), dir.path() / "artifacts");
}

}  // namespace
}  // namespace kiln::measure
