#include "measure/runner_server.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "measure/candidate_job.h"
#include "measure/subprocess.h"
#include "measure/wire_format.h"
#include "support/json_read.h"

namespace kiln::measure::detail {

namespace {

// What the child said before it ended: its last phase and its result, if any.
struct ChildReport {
  std::string phase;
  std::optional<nlohmann::json> result;
  std::optional<nlohmann::json> reference;
  size_t first_raw_frame = 0;
};

ChildReport read_report(const ChildRun &run) {
  ChildReport report;
  for (size_t i = 0; i < run.frames.size(); ++i) {
    nlohmann::json j = kiln::support::parse_json_or_discarded(run.frames[i]);
    if (!j.is_object()) continue;
    if (j.contains("phase")) report.phase = j["phase"].get<std::string>();
    if (j.contains("result")) report.result = j["result"];
    if (j.contains("reference")) {
      report.reference = j["reference"];
      report.first_raw_frame = i + 1;
      break;  // the rest are raw buffers
    }
  }
  return report;
}

std::string phase_words(const std::string &phase) {
  if (phase == "loading") return " while loading";
  if (phase == "checking") return " during the correctness check";
  if (phase == "timing") return " while being timed";
  if (phase == "running") return " while running";
  return "";
}

// A run that ended without a result: timed out, crashed, or exited on its own.
RunResult classify_abnormal_end(const ChildRun &run, const ChildReport &report, const std::string &who,
                                const ServerOptions &options) {
  RunResult result;
  result.run_seconds = run.exit.seconds;
  if (run.exit.timed_out) {
    result.error = ErrorKind::kRunTimeout;
    result.message = who + " ran longer than the " + format_seconds(options.run_timeout_seconds) +
                     " run timeout and was killed" + phase_words(report.phase);
    return result;
  }
  result.error = ErrorKind::kRuntimeError;
  if (run.exit.exit_code == kChildSyscallRefused || run.exit.signal == SIGSYS) {
    result.message = who + " was stopped by the runner's system-call filter after " + format_seconds(run.exit.seconds) +
                     phase_words(report.phase) +
                     ": it made a system call no kernel needs (a kernel uses memory, threads and the clock; "
                     "measure/README.md lists what is allowed)";
    return result;
  }
  if (run.exit.signal != 0) {
    result.message = who + " crashed with " + signal_name(run.exit.signal) + " after " +
                     format_seconds(run.exit.seconds) + phase_words(report.phase);
  } else if (run.exit.exit_code == kChildOutOfMemory) {
    result.message = who + " ran out of memory after " + format_seconds(run.exit.seconds) + phase_words(report.phase) +
                     ": an allocation failed under its " + format_bytes(options.memory_limit_bytes) +
                     " memory limit (--memory-limit-mb)";
    return result;
  } else {
    result.message = who + " exited with code " + std::to_string(run.exit.exit_code) + " after " +
                     format_seconds(run.exit.seconds) + phase_words(report.phase) + " without reporting a result";
  }
  // The limit shows itself only as failed allocations (a crash, an abort, an error
  // code), so say so when the peak memory was near it.
  if (options.memory_limit_bytes > 0 && run.exit.max_rss_bytes >= options.memory_limit_bytes * 8 / 10) {
    result.message += "; it used " + format_bytes(run.exit.max_rss_bytes) + " of its " +
                      format_bytes(options.memory_limit_bytes) + " memory limit, so it most likely ran out of memory";
  }
  return result;
}

RunResult result_from_report(const nlohmann::json &j, double seconds) {
  RunResult result = run_result_from_json(j);
  result.run_seconds = seconds;
  return result;
}

struct CacheEntry {
  std::string key;
  ReferenceOutputs outputs;
};

class Server {
 public:
  explicit Server(const ServerOptions &options) : options_(options) {
    limits_.memory_limit_bytes = options.memory_limit_bytes;
    limits_.num_threads = options.num_threads;
    limits_.sandbox = options.sandbox;
  }

  RunResult run(const RunInput &input, CandidateTiming timing = CandidateTiming::kFull,
                double *pass_seconds = nullptr) {
    const ReferenceOutputs *reference = nullptr;
    if (!input.reference_artifact_path.empty()) {
      RunResult failure;
      reference = find_or_run_reference(input, failure);
      if (reference == nullptr) return failure;
    }
    ChildRun run = run_in_child([&](int socket) { candidate_job(socket, input, reference, limits_, timing); },
                                options_.run_timeout_seconds);
    ChildReport report = read_report(run);
    if (report.result && !run.exit.timed_out) {
      if (pass_seconds) *pass_seconds = report.result->value("pass_seconds", 0.0);
      return result_from_report(*report.result, run.exit.seconds);
    }
    return classify_abnormal_end(run, report, "candidate", options_);
  }

  // The batch: each candidate loaded, checked and calibrated in its own child, then the
  // ones that passed timed round-robin in one shared child. A candidate that crashes or
  // hangs the shared child gets that error; the rest are timed again in a fresh one.
  std::vector<RunResult> run_batch(const std::vector<RunInput> &inputs) {
    std::vector<RunResult> results(inputs.size());
    std::vector<size_t> pending;
    std::vector<double> pass_seconds(inputs.size(), 0.0);
    for (size_t i = 0; i < inputs.size(); ++i) {
      results[i] = run(inputs[i], CandidateTiming::kCalibrate, &pass_seconds[i]);
      // Failed, or gave up in its warm-up (already timed, once): final.
      if (results[i].ok() && results[i].repeat_seconds.empty()) pending.push_back(i);
    }
    while (!pending.empty()) {
      std::vector<InterleavedCandidate> group;
      double expected_seconds = 0;
      for (size_t i : pending) {
        const TimingOptions &t = inputs[i].timing;
        group.push_back({inputs[i].artifact_path, inputs[i].input_seed, results[i].number, std::max(t.repeat, 1),
                         t.flush_cache, t.flush_args});
        expected_seconds += std::max(t.repeat, 1) * pass_seconds[i];
      }
      // Three times what the repeats should take, plus one candidate's own timeout for
      // loading and the slack a lone run would have had.
      ChildRun shared = run_in_child([&](int socket) { interleaved_timing_job(socket, group, limits_); },
                                     3 * expected_seconds + options_.run_timeout_seconds);
      std::vector<std::vector<double>> timed(pending.size());
      constexpr size_t kNobody = SIZE_MAX;
      size_t running = kNobody;  // the candidate whose pass was under way
      bool done = false;
      // The frames come from a process that ran candidate code: read them defensively.
      auto index = [&](const nlohmann::json &j, const char *key) {
        const nlohmann::json &v = j[key];
        return v.is_number_unsigned() && v.get<size_t>() < pending.size() ? v.get<size_t>() : kNobody;
      };
      for (const std::string &frame : shared.frames) {
        nlohmann::json j = kiln::support::parse_json_or_discarded(frame);
        if (!j.is_object()) continue;
        if (j.contains("done")) done = true;
        if (j.contains("failed")) {
          size_t k = index(j, "failed");
          if (k == kNobody) continue;
          auto text = [&](const char *key) { return j[key].is_string() ? j[key].get<std::string>() : std::string(); };
          std::string error = text("error"), message = text("message");
          results[pending[k]].error = error_kind_from_string(error).value_or(ErrorKind::kRuntimeError);
          results[pending[k]].message = message + " (timed interleaved with its batch)";
          running = kNobody;
        } else if (j.contains("seconds") && j.contains("candidate")) {
          size_t k = index(j, "candidate");
          if (k != kNobody && j["seconds"].is_number()) timed[k].push_back(j["seconds"].get<double>());
          running = kNobody;
        } else if (j.contains("candidate")) {
          running = index(j, "candidate");
        }
      }
      double share = shared.exit.seconds / static_cast<double>(pending.size());
      std::vector<size_t> again;
      for (size_t k = 0; k < pending.size(); ++k) {
        RunResult &r = results[pending[k]];
        if (!r.ok()) continue;  // failed inside the shared child, said so above
        if (done && !shared.exit.timed_out) {
          r.repeat_seconds = timed[k];
          r.run_seconds += share;
        } else if (running == k) {
          ChildReport report;
          report.phase = "timing";
          r = classify_abnormal_end(shared, report, "candidate", options_);
          if (shared.exit.timed_out) {
            r.message = "candidate hung while being timed: the process timing its batch ran past its " +
                        format_seconds(3 * expected_seconds + options_.run_timeout_seconds) +
                        " deadline (three times the calibrated repeats, plus the run timeout) and was killed";
          }
          r.message += " (timed interleaved with its batch; the others were timed again without it)";
        } else {
          again.push_back(pending[k]);
        }
      }
      // Nobody to blame (the shared child died between passes): time the rest alone.
      if (again.size() == pending.size()) {
        for (size_t i : again) results[i] = run(inputs[i]);
        break;
      }
      pending = std::move(again);
    }
    return results;
  }

 private:
  // Keyed by the file's identity too: a rebuilt reference at the same path must not
  // be served from a stale entry.
  static std::string cache_key(const std::string &path, uint64_t seed) {
    struct stat st {};
    stat(path.c_str(), &st);
    return path + '\0' + std::to_string(seed) + '\0' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) +
           ':' + std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) + '.' +
           std::to_string(st.st_mtim.tv_nsec);
  }

  const ReferenceOutputs *find_or_run_reference(const RunInput &input, RunResult &failure) {
    const std::string &path = input.reference_artifact_path;
    std::string key = cache_key(path, input.input_seed);
    for (const CacheEntry &entry : cache_) {
      if (entry.key == key) return &entry.outputs;
    }
    ChildRun run = run_in_child([&](int socket) { reference_job(socket, path, input.input_seed, limits_); },
                                options_.run_timeout_seconds);
    ChildReport report = read_report(run);
    std::string who = "the reference artifact " + path;
    if (report.result && !run.exit.timed_out) {
      failure = result_from_report(*report.result, run.exit.seconds);
      failure.message = who + ": " + failure.message;
      return nullptr;
    }
    std::optional<ReferenceOutputs> outputs;
    if (report.reference && !run.exit.timed_out) outputs = collect_reference(run, report);
    if (!outputs) {
      failure = classify_abnormal_end(run, report, who, options_);
      return nullptr;
    }
    return insert(std::move(key), std::move(*outputs));
  }

  static std::optional<ReferenceOutputs> collect_reference(const ChildRun &run, const ChildReport &report) {
    ReferenceOutputs outputs;
    try {
      outputs.params = parse_params(*report.reference);
    } catch (const std::exception &) {
      return std::nullopt;
    }
    if (run.frames.size() - report.first_raw_frame != outputs.params.size()) return std::nullopt;
    outputs.buffers.assign(run.frames.begin() + static_cast<std::ptrdiff_t>(report.first_raw_frame), run.frames.end());
    return outputs;
  }

  // First in, first out within a byte budget; the newest entry always stays, even when
  // it alone is over budget (one task's reference is what a tuner needs).
  const ReferenceOutputs *insert(std::string key, ReferenceOutputs outputs) {
    cache_.push_back({std::move(key), std::move(outputs)});
    int64_t total = 0;
    for (const CacheEntry &entry : cache_) total += entry.outputs.total_bytes();
    while (cache_.size() > 1 && total > options_.reference_cache_bytes) {
      total -= cache_.front().outputs.total_bytes();
      cache_.pop_front();
    }
    return &cache_.back().outputs;
  }

  ServerOptions options_;
  ChildLimits limits_;
  std::deque<CacheEntry> cache_;  // deque: pointers to entries stay valid on push_back
};

void load_runtime(const std::string &library) {
  if (dlsym(RTLD_DEFAULT, "kiln_rt_parallel_for") != nullptr || library.empty()) return;
  // RTLD_GLOBAL so that artifacts loaded later resolve kiln_rt_* against it.
  if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char *why = dlerror();
    std::fprintf(stderr, "kiln measure: cannot load the runtime %s: %s\n", library.c_str(), why ? why : "");
  }
}

}  // namespace

void serve(int socket, const ServerOptions &options) {
  // Inherited dispositions could break waiting for children (SIGCHLD ignored means
  // no zombies to reap and no exit status).
  signal(SIGCHLD, SIG_DFL);
  load_runtime(options.runtime_library);
  Server server(options);
  for (;;) {
    std::string request;
    if (read_frame(socket, request, Clock::time_point::max()) != ReadStatus::kOk) return;
    nlohmann::json reply;
    try {
      nlohmann::json j = kiln::support::parse_json(request);
      if (j.contains("batch")) {
        std::vector<RunInput> inputs;
        for (const nlohmann::json &input : j.at("batch")) inputs.push_back(run_input_from_json(input));
        reply["results"] = nlohmann::json::array();
        for (const RunResult &r : server.run_batch(inputs)) reply["results"].push_back(to_json(r));
      } else {
        reply = to_json(server.run(run_input_from_json(j)));
      }
    } catch (const std::exception &e) {
      RunResult result;
      result.error = ErrorKind::kRuntimeError;
      result.message = std::string("the runner could not run the candidate: ") + e.what();
      reply = to_json(result);
    }
    if (!write_frame(socket, reply.dump())) return;
  }
}

}  // namespace kiln::measure::detail
