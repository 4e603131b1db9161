// The live table and the HTML report of `kiln tune --model`, from a job's recorded
// rounds (a synthetic two-task job: the presentation depends on nothing else).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "scheduler/report.h"

namespace kiln::scheduler {
namespace {

SchedulerResult two_task_job() {
  SchedulerResult r;
  SchedulerProgress &p = r.progress;
  TaskState conv, dense;
  conv.summary = "conv2d+relu 1x64x56x56";
  conv.weight = 2;
  conv.flops = 2e9;
  dense.summary = "dense+bias 1x512";
  dense.weight = 1;
  dense.flops = 1e6;
  // Round by round: conv 4 ms -> 2 ms, dense 0.5 ms -> 0.25 ms (stopped at the end).
  double conv_best = 0, dense_best = 0;
  const std::vector<std::pair<int, double>> rounds = {{0, 4e-3}, {1, 5e-4}, {0, 3e-3}, {0, 2e-3}, {1, 2.5e-4}};
  for (size_t k = 0; k < rounds.size(); ++k) {
    auto [task, best] = rounds[k];
    (task == 0 ? conv_best : dense_best) = best;
    double estimate = conv_best > 0 && dense_best > 0 ? 2 * conv_best + dense_best : 0;
    p.rounds.push_back({static_cast<int64_t>(32 * (k + 1)), 10.0 * static_cast<double>(k + 1), task, best, estimate});
  }
  conv.progress.trials = 96;
  conv.progress.best_seconds = conv_best;
  dense.progress.trials = 64;
  dense.progress.best_seconds = dense_best;
  dense.stopped = true;
  p.tasks = {conv, dense};
  p.trials = 160;
  p.round = 5;
  p.elapsed_seconds = 50;
  p.estimated_latency = 2 * conv_best + dense_best;
  TuneResult conv_result, dense_result;
  conv_result.progress.time.build = 20;
  dense_result.progress.time.run = 5;
  r.tasks = {conv_result, dense_result};
  return r;
}

TEST(Report, LiveTableHasAHeadlineAndARowPerTask) {
  SchedulerResult job = two_task_job();
  std::string table = progress_table(job.progress, ReportBudget{320, 0});
  // 160 of 320 trials at 3.2 trials/s: 50 s to go.
  EXPECT_NE(table.find("round 5  trials 160/320  3.2 trials/s  elapsed 50s  ETA 50s\n"), std::string::npos) << table;
  // 4.25 ms now, 8.5 ms when both tasks first had a program: -50%.
  EXPECT_NE(table.find("estimated model latency 4.2500 ms (-50.0% over the last 3 rounds)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("conv2d+relu 1x64x56x56"), std::string::npos) << table;
  // conv: 2 x 2 ms of 4.25 ms = 94.1%, 2 GFLOP in 2 ms = 1000 GFLOP/s.
  EXPECT_NE(table.find("2.0000   1000.00  94.1%"), std::string::npos) << table;
  EXPECT_NE(table.find("5.9%  stopped\n"), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 5);
  // A time limit closer than the trial budget sets the ETA.
  EXPECT_NE(progress_table(job.progress, ReportBudget{320, 60}).find("ETA 10s"), std::string::npos);
}

TEST(Report, LiveTableBeforeEveryTaskHasAProgram) {
  SchedulerProgress p;
  p.tasks.resize(2);
  p.tasks[0].summary = "a";
  p.tasks[1].summary = "b";
  std::string table = progress_table(p, ReportBudget{100, 0});
  EXPECT_NE(table.find("not yet"), std::string::npos) << table;
  EXPECT_NE(table.find("ETA ?"), std::string::npos) << table;
}

TEST(Report, HtmlPageIsSelfContainedWithCurvesAndTable) {
  SchedulerResult job = two_task_job();
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln_report_test_" + std::to_string(getpid()));
  ReportContext context{"models/m<1>.onnx", "llvm -mcpu=znver3", "gradient", {320, 0}, MeasuredModel{9.0, 4.5}};
  std::filesystem::path page = write_html_report(dir, job, context);
  std::ifstream in(page);
  std::stringstream text;
  text << in.rdbuf();
  std::string html = text.str();
  std::filesystem::remove_all(dir);
  EXPECT_NE(html.find("models/m&lt;1&gt;.onnx"), std::string::npos) << "names are escaped";
  EXPECT_NE(html.find("tuned <b>4.500 ms</b> (2.00&times;)"), std::string::npos);
  // Three charts: the model over trials and over time (one curve each), each task (two).
  size_t charts = 0, curves = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  for (size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++curves;
  EXPECT_EQ(charts, 3u);
  EXPECT_EQ(curves, 4u);
  EXPECT_NE(html.find("<td>dense+bias 1x512</td>"), std::string::npos);
  EXPECT_NE(html.find("build 20.0 s"), std::string::npos);
  // Nothing loaded from elsewhere: no scripts, no links, no images by URL.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
}

TEST(Report, UnwritableFolderIsAClearError) {
  try {
    write_html_report("/proc/kiln-report", two_task_job(), ReportContext{});
    FAIL() << "wrote into /proc";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("/proc/kiln-report"), std::string::npos) << e.what();
  }
}

}  // namespace
// Chart axes are labelled at round values inside the range, about as many as asked.
TEST(Report, AxisTicksAreRoundValues) {
  auto expect_ticks = [](double lo, double hi, const std::vector<double> &want) {
    std::vector<double> got = round_ticks(lo, hi, 5);
    ASSERT_EQ(got.size(), want.size()) << lo << ".." << hi;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9 * want.back()) << lo << ".." << hi;
  };
  expect_ticks(24.2, 52.41, {25, 30, 35, 40, 45, 50});
  expect_ticks(0, 1632, {0, 500, 1000, 1500});
  expect_ticks(0, 1.05, {0, 0.2, 0.4, 0.6, 0.8, 1});
  expect_ticks(3, 3, {3});  // a flat curve still gets a label
}

}  // namespace kiln::scheduler
