#include "scheduler/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kiln::scheduler {
namespace {

std::string format(const char *fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

// "1h02m", "3m07s", "42s".
std::string duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  }
  return buf;
}

// The index of the round `back` rounds ago, or of the first one after it that had an
// estimate (every task with a program); nullopt when none had one.
std::optional<size_t> estimate_rounds_ago(const std::vector<RoundRecord> &rounds, size_t back) {
  for (size_t k = rounds.size() > back ? rounds.size() - 1 - back : 0; k < rounds.size(); ++k)
    if (rounds[k].estimated_latency > 0) return k;
  return std::nullopt;
}

double share(const TaskState &t, double total) {
  return total > 0 ? 100.0 * t.weight * t.progress.best_seconds / total : 0.0;
}

double gflops(const TaskState &t) {
  return t.progress.best_seconds > 0 ? t.flops / t.progress.best_seconds / 1e9 : 0.0;
}

std::string escape_html(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // x, y; drawn as a step line
};

constexpr const char *kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// A step chart of best-so-far curves: each series holds its value until its next point.
std::string svg_chart(const std::string &title, const std::string &x_label, const std::string &y_label,
                      const std::vector<Series> &series) {
  // A legend (for several curves) goes below the plot, one row per curve.
  const double legend = series.size() > 1 ? 16.0 * static_cast<double>(series.size()) + 8 : 0;
  const double width = 720, height = 320 + legend, left = 70, right = 20, top = 30, bottom = 45 + legend;
  double x_max = 0, y_min = INFINITY, y_max = 0;
  for (const Series &s : series)
    for (const auto &[x, y] : s.points) {
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<text x=\"" << width / 2 << "\" y=\"18\" text-anchor=\"middle\" font-weight=\"bold\">" << escape_html(title)
      << "</text>\n";
  if (!(y_max > 0) || x_max <= 0) {
    svg << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
        << "\" text-anchor=\"middle\">no measured programs yet</text>\n</svg>\n";
    return svg.str();
  }
  // Some headroom, and a floor at 0 unless the curves stay far above it.
  double lo = y_min > 0.5 * y_max ? y_min - 0.1 * (y_max - y_min) - 1e-12 : 0.0;
  double hi = y_max + 0.05 * (y_max - lo) + 1e-12;
  double plot_w = width - left - right, plot_h = height - top - bottom;
  auto px = [&](double x) { return left + plot_w * x / x_max; };
  auto py = [&](double y) { return top + plot_h * (1 - (y - lo) / (hi - lo)); };
  svg << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
      << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (double y : round_ticks(lo, hi, 5))
    svg << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
        << "\" stroke=\"#eee\"/>\n"
        << "<text x=\"" << left - 6 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">" << format("%.4g", y)
        << "</text>\n";
  for (double x : round_ticks(0, x_max, 5))
    svg << "<text x=\"" << px(x) << "\" y=\"" << top + plot_h + 16 << "\" text-anchor=\"middle\">" << format("%.4g", x)
        << "</text>\n";
  svg << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << top + plot_h + 34 << "\" text-anchor=\"middle\">"
      << escape_html(x_label) << "</text>\n"
      << "<text transform=\"translate(16," << top + plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
      << escape_html(y_label) << "</text>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const Series &s = series[i];
    if (s.points.empty()) continue;
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << s.color << "\" points=\"";
    double last_y = s.points.front().second;
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto &[x, y] = s.points[k];
      if (k > 0) svg << px(x) << "," << py(last_y) << " ";
      svg << px(x) << "," << py(y) << " ";
      last_y = y;
    }
    // A best-so-far value holds until the end of the run.
    if (s.points.back().first < x_max) svg << px(x_max) << "," << py(last_y);
    svg << "\"><title>" << escape_html(s.name) << "</title></polyline>\n";
  }
  if (series.size() > 1) {
    for (size_t i = 0; i < series.size(); ++i) {
      double y = top + plot_h + 58 + 16.0 * static_cast<double>(i);
      svg << "<rect x=\"" << left << "\" y=\"" << y - 9 << "\" width=\"10\" height=\"10\" fill=\"" << series[i].color
          << "\"/>\n<text x=\"" << left + 15 << "\" y=\"" << y << "\">" << escape_html(series[i].name) << "</text>\n";
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace

std::vector<double> round_ticks(double lo, double hi, int target) {
  double raw = (hi - lo) / std::max(target, 1);
  if (!(raw > 0) || !std::isfinite(raw)) return {lo};
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  // The round step nearest the raw one (on a log scale).
  double step = magnitude;
  for (double m : {2.0, 5.0, 10.0})
    if (std::abs(std::log(m * magnitude / raw)) < std::abs(std::log(step / raw))) step = m * magnitude;
  std::vector<double> ticks;
  for (auto k = static_cast<int64_t>(std::ceil(lo / step - 1e-9)); k * step <= hi + 1e-9 * step; ++k)
    ticks.push_back(static_cast<double>(k) * step);
  return ticks;
}

TimeBreakdown total_time(const SchedulerResult &result) {
  TimeBreakdown time;
  for (const TuneResult &r : result.tasks) {
    time.search += r.progress.time.search;
    time.features += r.progress.time.features;
    time.training += r.progress.time.training;
    time.build += r.progress.time.build;
    time.run += r.progress.time.run;
    time.database += r.progress.time.database;
  }
  return time;
}

std::string progress_table(const SchedulerProgress &p, const ReportBudget &budget) {
  std::ostringstream out;
  double rate = p.elapsed_seconds > 0 ? static_cast<double>(p.trials) / p.elapsed_seconds : 0;
  double eta = rate > 0 ? static_cast<double>(std::max<int64_t>(0, budget.trials - p.trials)) / rate : INFINITY;
  if (budget.time_limit_seconds > 0) eta = std::min(eta, std::max(0.0, budget.time_limit_seconds - p.elapsed_seconds));
  char line[256];
  std::snprintf(line, sizeof line, "round %lld  trials %lld/%lld  %.1f trials/s  elapsed %s  ETA %s\n",
                (long long)p.round, (long long)p.trials, (long long)budget.trials, rate,
                duration(p.elapsed_seconds).c_str(), duration(eta).c_str());
  out << line;
  if (p.estimated_latency > 0) {
    constexpr size_t kTrendRounds = 10;
    out << "estimated model latency " << format("%.4f", p.estimated_latency * 1e3) << " ms";
    std::optional<size_t> from = estimate_rounds_ago(p.rounds, kTrendRounds);
    if (from && *from + 1 < p.rounds.size()) {
      double before = p.rounds[*from].estimated_latency;
      out << " (" << format("%+.1f", 100.0 * (p.estimated_latency - before) / before) << "% over the last "
          << p.rounds.size() - 1 - *from << " rounds)";
    }
    out << "\n";
  } else {
    out << "estimated model latency: not yet (every task needs a measured program)\n";
  }
  std::snprintf(line, sizeof line, "%3s  %-36s %6s %7s %11s %9s %6s\n", "#", "task", "weight", "trials", "best ms",
                "GFLOP/s", "share");
  out << line;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const TaskState &t = p.tasks[i];
    std::snprintf(line, sizeof line, "%3zu  %-36s %6d %7lld %11.4f %9.2f %5.1f%%%s\n", i,
                  t.summary.substr(0, 36).c_str(), t.weight, (long long)t.progress.trials,
                  t.progress.best_seconds * 1e3, gflops(t), share(t, p.estimated_latency),
                  t.stopped ? "  stopped" : "");
    out << line;
  }
  return out.str();
}

std::filesystem::path write_html_report(const std::filesystem::path &dir, const SchedulerResult &result,
                                        const ReportContext &context) {
  const SchedulerProgress &p = result.progress;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create the report folder " + dir.string() + ": " + ec.message());

  Series by_trials{"estimated model latency", kPalette[0], {}}, by_time{"estimated model latency", kPalette[0], {}};
  std::vector<Series> per_task(p.tasks.size());
  std::vector<double> first_best(p.tasks.size(), 0);
  for (size_t i = 0; i < p.tasks.size(); ++i)
    per_task[i] = Series{"#" + std::to_string(i) + " " + p.tasks[i].summary, kPalette[i % std::size(kPalette)], {}};
  for (const RoundRecord &r : p.rounds) {
    if (r.estimated_latency > 0) {
      by_trials.points.emplace_back(static_cast<double>(r.trials), r.estimated_latency * 1e3);
      by_time.points.emplace_back(r.elapsed_seconds, r.estimated_latency * 1e3);
    }
    if (r.task < 0 || static_cast<size_t>(r.task) >= per_task.size() || r.task_best_seconds <= 0) continue;
    auto t = static_cast<size_t>(r.task);
    if (first_best[t] == 0) first_best[t] = r.task_best_seconds;
    per_task[t].points.emplace_back(static_cast<double>(r.trials), r.task_best_seconds / first_best[t]);
  }

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Kiln tuning report: "
       << escape_html(context.model) << "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:780px}"
       << "table{border-collapse:collapse}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}"
       << "td:nth-child(2),th:nth-child(2){text-align:left}</style></head><body>\n"
       << "<h1>Tuning report</h1>\n<p>Model <code>" << escape_html(context.model) << "</code> on <code>"
       << escape_html(context.target) << "</code>; task scheduler <code>" << escape_html(context.allocation)
       << "</code>.</p>\n<p>" << p.trials << " candidates measured";
  if (context.budget.trials > 0) html << " (budget " << context.budget.trials << ")";
  html << " in " << duration(p.elapsed_seconds) << " over " << p.round << " rounds ("
       << format("%.1f", p.elapsed_seconds > 0 ? p.trials / p.elapsed_seconds : 0.0)
       << " trials/s). Estimated model latency (sum of weight &times; best latency of each task): <b>"
       << format("%.4f", p.estimated_latency * 1e3) << " ms</b>.";
  // The rounds' curve ends at the tuning measurements; the end-of-run re-timing of each
  // task's fastest programs (their confirmed medians) gives the final estimate.
  if (!by_trials.points.empty()) {
    double last_round_ms = by_trials.points.back().second, final_ms = p.estimated_latency * 1e3;
    if (std::abs(final_ms - last_round_ms) > 0.005 * last_round_ms)
      html << " The curves below end at " << format("%.4f", last_round_ms)
           << " ms, by the tuning rounds' own timings; re-timing each task's fastest programs side by side at the "
              "end gave the final figure.";
  }
  if (context.measured)
    html << " Measured with the executor: untuned " << format("%.3f", context.measured->untuned_ms) << " ms, tuned <b>"
         << format("%.3f", context.measured->tuned_ms) << " ms</b> ("
         << format("%.2f", context.measured->untuned_ms / context.measured->tuned_ms) << "&times;).";
  html << "</p>\n"
       << svg_chart("Estimated model latency over trials", "measured candidates", "ms", {by_trials})
       << svg_chart("Estimated model latency over wall time", "seconds", "ms", {by_time})
       << svg_chart("Best latency of each task, relative to its first", "measured candidates (all tasks)",
                    "best / first best", per_task)
       << "<h2>Tasks</h2>\n<table><tr><th>#</th><th>task</th><th>weight</th><th>trials</th><th>best ms</th>"
       << "<th>GFLOP/s</th><th>share</th><th>state</th></tr>\n";
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const TaskState &t = p.tasks[i];
    html << "<tr><td>" << i << "</td><td>" << escape_html(t.summary) << "</td><td>" << t.weight << "</td><td>"
         << t.progress.trials << "</td><td>" << format("%.4f", t.progress.best_seconds * 1e3) << "</td><td>"
         << format("%.2f", gflops(t)) << "</td><td>" << format("%.1f%%", share(t, p.estimated_latency)) << "</td><td>"
         << (t.stopped ? "stopped early" : "to the end") << "</td></tr>\n";
  }
  TimeBreakdown time = total_time(result);
  html << "</table>\n<h2>Where the time went</h2>\n<p>search " << format("%.1f", time.search) << " s, features "
       << format("%.1f", time.features) << " s, training " << format("%.1f", time.training) << " s, build "
       << format("%.1f", time.build) << " s, run " << format("%.1f", time.run) << " s, database "
       << format("%.1f", time.database) << " s.</p>\n</body></html>\n";

  std::filesystem::path page = dir / "index.html";
  std::ofstream out(page);
  out << html.str();
  out.close();
  if (!out) throw std::runtime_error("cannot write the report " + page.string());
  return page;
}

}  // namespace kiln::scheduler
