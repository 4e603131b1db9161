#include "scheduler/report.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
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

// printf's field width for `text` to take `columns` columns: "—" is one column in
// three bytes.
int width(const std::string &text, int columns) {
  int continuation = 0;
  for (char c : text) continuation += (static_cast<unsigned char>(c) & 0xC0) == 0x80;
  return columns + continuation;
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

// A labelled point drawn over a chart: the figure the job ended with.
struct Marker {
  double x = 0, y = 0;
  std::string label;
};

constexpr const char *kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// Tick labels with as many decimals as the step between ticks needs, so that no two
// read the same ("0.0779" five times for a flat curve was the old way).
std::string tick_label(double value, double step) {
  int decimals = step > 0 ? std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9))) : 3;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 9), value);
  return buf;
}

struct ChartSize {
  double width = 720, height = 300;
};

// A step chart of best-so-far curves: each series holds its value until `x_end` (the
// end of the job). The y axis starts at 0, so the drop a curve shows is its real
// share; `markers` are drawn as labelled dots.
std::string svg_chart(const std::string &title, const std::string &x_label, const std::string &y_label,
                      const std::vector<Series> &series, double x_end, const std::vector<Marker> &markers = {},
                      ChartSize size = {}) {
  const double width = size.width, height = size.height, left = 64, right = 16, top = 28, bottom = 42;
  double x_max = x_end, y_max = 0;
  for (const Series &s : series)
    for (const auto &[x, y] : s.points) {
      x_max = std::max(x_max, x);
      y_max = std::max(y_max, y);
    }
  for (const Marker &m : markers) {
    x_max = std::max(x_max, m.x);
    y_max = std::max(y_max, m.y);
  }
  std::ostringstream svg;
  svg << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << width << " " << height
      << "\" width=\"100%\" style=\"max-width:" << width << "px\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<text x=\"" << width / 2 << "\" y=\"17\" text-anchor=\"middle\" font-weight=\"bold\">" << escape_html(title)
      << "</text>\n";
  if (!(y_max > 0) || x_max <= 0) {
    svg << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
        << "\" text-anchor=\"middle\">no measured programs yet</text>\n</svg>\n";
    return svg.str();
  }
  const double lo = 0, hi = y_max * 1.08;
  double plot_w = width - left - right, plot_h = height - top - bottom;
  auto px = [&](double x) { return left + plot_w * x / x_max; };
  auto py = [&](double y) { return top + plot_h * (1 - (y - lo) / (hi - lo)); };
  svg << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
      << "\" fill=\"none\" stroke=\"#999\"/>\n";
  std::vector<double> y_ticks = round_ticks(lo, hi, 5), x_ticks = round_ticks(0, x_max, 5);
  double y_step = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : hi;
  double x_step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : x_max;
  for (double y : y_ticks)
    svg << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
        << "\" stroke=\"#eee\"/>\n"
        << "<text class=\"ytick\" x=\"" << left - 6 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">"
        << tick_label(y, y_step) << "</text>\n";
  for (double x : x_ticks)
    svg << "<text class=\"xtick\" x=\"" << px(x) << "\" y=\"" << top + plot_h + 15 << "\" text-anchor=\"middle\">"
        << tick_label(x, x_step) << "</text>\n";
  svg << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << top + plot_h + 33 << "\" text-anchor=\"middle\">"
      << escape_html(x_label) << "</text>\n"
      << "<text transform=\"translate(14," << top + plot_h / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
      << escape_html(y_label) << "</text>\n";
  for (const Series &s : series) {
    if (s.points.empty()) continue;
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << s.color << "\" points=\"";
    double last_y = s.points.front().second;
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto &[x, y] = s.points[k];
      if (k > 0) svg << px(x) << "," << py(last_y) << " ";
      svg << px(x) << "," << py(y) << " ";
      last_y = y;
    }
    // A best-so-far value holds until the end of the job.
    if (s.points.back().first < x_max) svg << px(x_max) << "," << py(last_y);
    svg << "\"><title>" << escape_html(s.name) << "</title></polyline>\n";
  }
  for (const Marker &m : markers)
    svg << "<circle class=\"marker\" cx=\"" << px(m.x) << "\" cy=\"" << py(m.y) << "\" r=\"4.5\" fill=\"#000\"><title>"
        << escape_html(m.label) << "</title></circle>\n<text x=\"" << px(m.x) - 8 << "\" y=\"" << py(m.y) - 8
        << "\" text-anchor=\"end\">" << escape_html(m.label) << "</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

// One horizontal bar per task, longest first: where the model's estimated time goes.
std::string share_bars(const std::vector<TaskState> &tasks, const std::vector<size_t> &order, double total) {
  const double row = 22, label_w = 330, bar_w = 330, width = label_w + bar_w + 150;
  const double height = row * static_cast<double>(order.size()) + 8;
  std::ostringstream svg;
  svg << "<svg id=\"shares\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << width << " " << height
      << "\" width=\"100%\" style=\"max-width:" << width << "px\" font-family=\"sans-serif\" font-size=\"12\">\n";
  for (size_t k = 0; k < order.size(); ++k) {
    const TaskState &t = tasks[order[k]];
    double y = 4 + row * static_cast<double>(k), pct = share(t, total);
    svg << "<text x=\"" << label_w - 8 << "\" y=\"" << y + 14 << "\" text-anchor=\"end\">#" << order[k] << " "
        << escape_html(t.summary.substr(0, 48)) << "</text>\n<rect class=\"share\" x=\"" << label_w << "\" y=\""
        << y + 3 << "\" width=\"" << std::max(1.0, bar_w * pct / 100) << "\" height=\"" << row - 6
        << "\" fill=\"#1f77b4\"/>\n<text x=\"" << label_w + bar_w * pct / 100 + 6 << "\" y=\"" << y + 14 << "\">"
        << format("%.1f%%", pct) << " · " << format("%.4f ms", t.weight * t.progress.best_seconds * 1e3)
        << (t.weight != 1 ? " (" + format("%g", t.weight) + "×)" : "") << "</text>\n";
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
    time.overlapped += r.progress.time.overlapped;
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
      size_t rounds = p.rounds.size() - 1 - *from;
      out << " (" << format("%+.1f", 100.0 * (p.estimated_latency - before) / before) << "% over the last "
          << (rounds == 1 ? std::string("round") : std::to_string(rounds) + " rounds") << ")";
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
    // "—" where there is no figure: no program measured yet, no FLOPs (a layout copy).
    const bool measured = t.progress.best_seconds > 0;
    const std::string best = measured ? format("%.4f", t.progress.best_seconds * 1e3) : "—";
    const std::string rate = measured && t.flops > 0 ? format("%.2f", gflops(t)) : "—";
    const std::string part =
        measured && p.estimated_latency > 0 ? format("%.1f%%", share(t, p.estimated_latency)) : "—";
    std::snprintf(line, sizeof line, "%3zu  %-36s %6.3g %7lld %*s %*s %*s%s\n", i, t.summary.substr(0, 36).c_str(),
                  t.weight, (long long)t.progress.trials, width(best, 11), best.c_str(), width(rate, 9), rate.c_str(),
                  width(part, 6), part.c_str(), t.stopped ? "  stopped" : "");
    out << line;
  }
  return out.str();
}

void check_report_folder(const std::filesystem::path &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create the report folder " + dir.string() + ": " + ec.message());
  const std::filesystem::path probe = dir / (".kiln-report-check-" + std::to_string(getpid()));
  std::ofstream out(probe);
  out << "kiln\n";
  out.close();
  const bool written = static_cast<bool>(out);
  const std::string why = std::strerror(errno);
  std::filesystem::remove(probe, ec);
  if (!written) throw std::runtime_error("cannot write in the report folder " + dir.string() + ": " + why);
}

std::filesystem::path write_html_report(const std::filesystem::path &dir, const SchedulerResult &result,
                                        const ReportContext &context) {
  const SchedulerProgress &p = result.progress;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create the report folder " + dir.string() + ": " + ec.message());

  // Tasks by their share of the estimate, largest first: the table, the bars and the
  // small charts all read top-down from what matters most.
  std::vector<size_t> order(p.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p.tasks[a].weight * p.tasks[a].progress.best_seconds > p.tasks[b].weight * p.tasks[b].progress.best_seconds;
  });
  Series by_trials{"estimated model latency", kPalette[0], {}}, by_time{"estimated model latency", kPalette[0], {}};
  std::vector<Series> per_task(p.tasks.size());
  for (size_t i = 0; i < p.tasks.size(); ++i) per_task[i] = Series{p.tasks[i].summary, kPalette[0], {}};
  for (const RoundRecord &r : p.rounds) {
    if (r.estimated_latency > 0) {
      by_trials.points.emplace_back(static_cast<double>(r.trials), r.estimated_latency * 1e3);
      by_time.points.emplace_back(r.elapsed_seconds, r.estimated_latency * 1e3);
    }
    if (r.task < 0 || static_cast<size_t>(r.task) >= per_task.size() || r.task_best_seconds <= 0) continue;
    per_task[static_cast<size_t>(r.task)].points.emplace_back(static_cast<double>(r.trials), r.task_best_seconds * 1e3);
  }
  const double job_seconds = std::max(context.job_seconds, p.elapsed_seconds);
  const double final_ms = p.estimated_latency * 1e3;
  const auto trials = static_cast<double>(p.trials);

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
       << "content=\"width=device-width\"><title>Kiln tuning report: " << escape_html(context.model)
       << "</title>\n<style>body{font-family:sans-serif;margin:24px auto;max-width:1240px;padding:0 16px}"
       << "table{border-collapse:collapse;width:100%}td,th{padding:3px 8px;border-bottom:1px solid #ddd;"
       << "text-align:right}td:nth-child(2),th:nth-child(2){text-align:left}"
       << "#headline{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}"
       << ".figure{border:1px solid #ccc;border-radius:6px;padding:10px 16px;min-width:180px;flex:1}"
       << ".figure b{display:block;font-size:26px}.figure span{color:#555;font-size:13px}"
       << ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}"
       << ".small{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:8px}"
       << "</style></head><body>\n<h1>Tuning report</h1>\n<p>Model <code>" << escape_html(context.model)
       << "</code> on <code>" << escape_html(context.target) << "</code>, " << p.tasks.size()
       << " tasks, task scheduler <code>" << escape_html(context.allocation) << "</code>.</p>\n<div id=\"headline\">\n";
  if (context.measured) {
    const MeasuredModel &m = *context.measured;
    html << "<div class=\"figure\" id=\"speedup\"><b>" << format("%.2f", m.untuned_ms / m.tuned_ms)
         << "&times;</b><span>faster tuned than untuned, measured</span></div>\n"
         << "<div class=\"figure\"><b>" << format("%.3f", m.tuned_ms) << " ms</b><span>tuned model, measured (untuned "
         << format("%.3f", m.untuned_ms) << " ms)</span></div>\n";
  }
  html
      << "<div class=\"figure\"><b>" << (final_ms > 0 ? format("%.4f", final_ms) + " ms" : std::string("—"))
      << "</b><span>estimated: the sum of each task's best kernel latency as tuned (weight &times; best)</span></div>\n"
      << "<div class=\"figure\"><b>" << p.trials << " trials</b><span>in " << duration(job_seconds) << " ("
      << format("%.1f", p.elapsed_seconds > 0 ? trials / p.elapsed_seconds : 0.0) << " trials/s while tuning"
      << (context.budget.trials > 0 ? "; budget " + std::to_string(context.budget.trials) : std::string()) << ")"
      << "</span></div>\n</div>\n";
  if (context.measured && final_ms > 0) {
    double ratio = context.measured->tuned_ms / final_ms;
    html << "<p>The measured model runs " << format("%.2f", ratio)
         << "&times; its estimate: the estimate adds up kernels timed alone, with their data in cache; in the model "
            "they follow one another, with layout steps and the weights arriving from memory "
            "(<code>kiln bench --profile</code> compares each step with its tuned latency).</p>\n";
  }
  html << "<h2>Where the model's time goes</h2>\n<p>Each task's share of the estimated latency "
          "(weight &times; its best latency).</p>\n"
       << share_bars(p.tasks, order, p.estimated_latency)
       << "<h2>Estimated model latency</h2>\n<div class=\"charts\">\n";
  std::vector<Marker> final_by_trials, final_by_time;
  if (final_ms > 0) {
    // The rounds' curve holds their own timings; the end-of-run re-timing of each task's
    // fastest programs gives the final figure, drawn where the job ended.
    final_by_trials.push_back({trials, final_ms, "final " + format("%.4f", final_ms) + " ms"});
    final_by_time.push_back({job_seconds, final_ms, "final " + format("%.4f", final_ms) + " ms"});
  }
  html << svg_chart("over trials", "measured candidates", "ms", {by_trials}, trials, final_by_trials)
       << svg_chart("over wall time", "seconds since the job started", "ms", {by_time}, job_seconds, final_by_time)
       << "</div>\n<h2>Each task's best latency</h2>\n<p>In the order of their share; the x axis counts every "
          "task's candidates, so a task's curve moves where it was tuned.</p>\n<div class=\"small\">\n";
  for (size_t i : order) {
    std::vector<Marker> end;
    if (p.tasks[i].progress.best_seconds > 0) end.push_back({trials, p.tasks[i].progress.best_seconds * 1e3, ""});
    html << svg_chart("#" + std::to_string(i) + " " + p.tasks[i].summary.substr(0, 40), "candidates", "ms",
                      {per_task[i]}, trials, end, ChartSize{380, 200});
  }
  html << "</div>\n<h2>Tasks</h2>\n<table id=\"tasks\"><tr><th>#</th><th>task</th><th>weight</th><th>trials</th>"
       << "<th>best ms</th><th>GFLOP/s</th><th>share</th><th>state</th></tr>\n";
  for (size_t i : order) {
    const TaskState &t = p.tasks[i];
    bool measured = t.progress.best_seconds > 0;
    html << "<tr><td>" << i << "</td><td>" << escape_html(t.summary) << "</td><td>" << t.weight << "</td><td>"
         << t.progress.trials << "</td><td>"
         << (measured ? format("%.4f", t.progress.best_seconds * 1e3) : std::string("—")) << "</td><td>"
         << (measured && t.flops > 0 ? format("%.2f", gflops(t)) : std::string("—")) << "</td><td>"
         << (measured && p.estimated_latency > 0 ? format("%.1f%%", share(t, p.estimated_latency)) : std::string("—"))
         << "</td><td>" << (t.stopped ? "stopped early" : "to the end") << "</td></tr>\n";
  }
  TimeBreakdown time = total_time(result);
  double accounted = time.search + time.features + time.training + time.build + time.run + time.database;
  html << "</table>\n<h2>Where the time went</h2>\n<p>search " << format("%.1f", time.search) << " s, features "
       << format("%.1f", time.features) << " s, training " << format("%.1f", time.training) << " s, build "
       << format("%.1f", time.build) << " s, run " << format("%.1f", time.run) << " s, database "
       << format("%.1f", time.database) << " s";
  if (time.overlapped > 0.05)
    html << " (besides " << format("%.1f", time.overlapped) << " s of builds while measurements ran)";
  if (job_seconds > accounted + 0.05)
    html << ", and " << format("%.1f", job_seconds - accounted)
         << " s else (scheduling, re-timing the best programs, compiling and timing the model)";
  html << ": " << format("%.1f", job_seconds) << " s in all.</p>\n</body></html>\n";

  std::filesystem::path page = dir / "index.html";
  std::ofstream out(page);
  out << html.str();
  out.close();
  if (!out) throw std::runtime_error("cannot write the report " + page.string());
  return page;
}

}  // namespace kiln::scheduler
