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
  // The headline: the measured speedup and latency, the estimate, trials and time.
  const size_t headline = html.find("<div id=\"headline\">");
  ASSERT_NE(headline, std::string::npos);
  EXPECT_NE(html.find("<b>2.00&times;</b><span>faster tuned than untuned, measured", headline), std::string::npos);
  EXPECT_NE(html.find("<b>4.500 ms</b>", headline), std::string::npos);
  EXPECT_NE(html.find("<b>4.2500 ms</b>", headline), std::string::npos);
  EXPECT_NE(html.find("runs 1.06&times; its estimate"), std::string::npos);
  // Four charts: the model over trials and over time, then one per task; a curve each.
  size_t charts = 0, curves = 0, markers = 0;
  for (size_t at = html.find("<svg class=\"chart\""); at != std::string::npos;
       at = html.find("<svg class=\"chart\"", at + 1))
    ++charts;
  for (size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++curves;
  for (size_t at = html.find("class=\"marker\""); at != std::string::npos; at = html.find("class=\"marker\"", at + 1))
    ++markers;
  EXPECT_EQ(charts, 4u);
  EXPECT_EQ(curves, 4u);
  EXPECT_EQ(markers, 4u);  // the final figure on each chart
  EXPECT_NE(html.find("final 4.2500 ms"), std::string::npos);
  // Largest share first, in the bars, the small charts and the table.
  size_t conv_row = html.find("<td>conv2d+relu 1x64x56x56</td>"), dense_row = html.find("<td>dense+bias 1x512</td>");
  ASSERT_NE(conv_row, std::string::npos);
  ASSERT_NE(dense_row, std::string::npos);
  EXPECT_LT(conv_row, dense_row);
  EXPECT_LT(html.find("#0 conv2d+relu"), html.find("#1 dense+bias"));
  EXPECT_NE(html.find("<svg id=\"shares\""), std::string::npos);
  // The breakdown covers the whole job: 25 s of named work in a 50 s job.
  EXPECT_NE(html.find("build 20.0 s"), std::string::npos);
  EXPECT_NE(html.find("and 25.0 s else"), std::string::npos) << html.substr(html.find("Where the time went"));

  // Nothing loaded from elsewhere: no scripts, no links, no images by URL.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
}

// A short, flat job (a few rounds, the estimate moving in its fourth digit): the axes
// start at 0 and their labels differ, tasks without a program or without FLOPs show
// "—", and one round of trend says "round".
TEST(Report, FlatShortJobsGetHonestAxesAndDashes) {
  SchedulerResult job;
  SchedulerProgress &p = job.progress;
  TaskState copy, conv, waiting;
  copy.summary = "transpose 1x3x32x32";
  copy.progress.best_seconds = 2e-6;
  conv.summary = "conv2d 1x32x32x3";
  conv.flops = 1e6;
  conv.progress.best_seconds = 7.59e-5;
  waiting.summary = "dense 1x8192";
  p.tasks = {copy, conv, waiting};
  p.rounds = {{8, 1.0, 1, 7.6e-5, 7.792e-5}, {16, 2.0, 1, 7.59e-5, 7.791e-5}};
  p.trials = 16;
  p.round = 2;
  p.elapsed_seconds = 2;
  p.estimated_latency = 7.79e-5;
  std::string table = progress_table(p, ReportBudget{64, 0});
  EXPECT_NE(table.find("over the last round)"), std::string::npos) << table;
  EXPECT_NE(table.find("transpose 1x3x32x32                       0       0      0.0020         —"), std::string::npos)
      << table;
  EXPECT_NE(table.find("dense 1x8192                              0       0           —         —      —"),
            std::string::npos)
      << table;

  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kiln_flat_report_" + std::to_string(getpid()));
  std::filesystem::path page =
      write_html_report(dir, job, ReportContext{"m.onnx", "llvm", "gradient", {64, 0}, {}, 30});
  std::ifstream in(page);
  std::stringstream text;
  text << in.rdbuf();
  std::string html = text.str();
  std::filesystem::remove_all(dir);
  // Each chart's y labels: distinct, the first 0.
  size_t labelled = 0;
  for (size_t svg = html.find("<svg class=\"chart\""); svg != std::string::npos;
       svg = html.find("<svg class=\"chart\"", svg + 1)) {
    size_t end = html.find("</svg>", svg);
    std::vector<std::string> labels;
    for (size_t at = html.find("class=\"ytick\"", svg); at != std::string::npos && at < end;
         at = html.find("class=\"ytick\"", at + 1)) {
      size_t from = html.find('>', at) + 1;
      labels.push_back(html.substr(from, html.find('<', from) - from));
    }
    if (labels.empty()) continue;  // a task without a program
    ++labelled;
    EXPECT_GE(labels.size(), 3u);
    EXPECT_EQ(std::stod(labels.front()), 0.0) << labels.front();
    std::vector<std::string> unique = labels;
    std::sort(unique.begin(), unique.end());
    EXPECT_EQ(std::unique(unique.begin(), unique.end()), unique.end()) << html.substr(svg, end - svg);
  }
  EXPECT_EQ(labelled, 4u);  // the model over trials and time, the two tasks with programs
  // The wall-time chart runs to the job's end (30 s), not the last round's (2 s).
  EXPECT_NE(html.find(">30</text>"), std::string::npos);
  EXPECT_NE(html.find("<td>—</td><td>—</td><td>—</td>"), std::string::npos);  // the dense layer, unmeasured
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
