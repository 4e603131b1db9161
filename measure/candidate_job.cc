#include "measure/candidate_job.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "measure/subprocess.h"
#include "measure/tensor_data.h"
#include "measure/timing.h"

namespace kiln::measure::detail {

int64_t ReferenceOutputs::total_bytes() const {
  int64_t total = 0;
  for (const std::string &b : buffers) total += static_cast<int64_t>(b.size());
  return total;
}

// Input streams: the correctness check and the reference share stream 0, so they see
// the same inputs; timing gets fresh data from stream 1.
static constexpr uint64_t kCheckStream = 0;
static constexpr uint64_t kTimingStream = 1;

void limit_address_space(int64_t extra_bytes) {
  long pages = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  auto cap = static_cast<rlim_t>(static_cast<int64_t>(pages) * sysconf(_SC_PAGESIZE) + extra_bytes);
  rlimit as{cap, cap};
  setrlimit(RLIMIT_AS, &as);
}

static void apply_limits(const ChildLimits &limits, int report_socket) {
  // A crashing candidate must not spend seconds writing a core file.
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (limits.memory_limit_bytes > 0) {
    // RLIMIT_AS, not RLIMIT_DATA: it also caps mmap'd allocations, which is how large
    // workspaces are allocated. Relative to what is mapped now (the runner's own code
    // and the cached reference) so the limit means the same in every process.
    limit_address_space(limits.memory_limit_bytes);
  }
  enter_sandbox(limits.sandbox, report_socket);
  if (limits.num_threads > 0) {
    // Looked up rather than linked so this file does not depend on the runtime's
    // presence; the runner makes sure libkiln_runtime is loaded globally.
    using SetThreads = void (*)(int32_t);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "kiln_rt_set_num_threads"))) {
      set(limits.num_threads);
    }
  }
}

static void send_json(int socket, const nlohmann::json &j) { write_frame(socket, j.dump()); }
static void send_phase(int socket, const char *phase) { send_json(socket, {{"phase", phase}}); }

static void send_result(int socket, ErrorKind error, const std::string &message,
                        const TimingOutcome *timing = nullptr) {
  nlohmann::json result = {{"error", to_string(error)}, {"message", message}};
  if (timing != nullptr) {
    result["repeat_seconds"] = timing->repeat_seconds;
    result["number"] = timing->number;
    result["calibration_calls"] = timing->calibration_calls;
    result["pass_seconds"] = timing->pass_seconds;
  }
  send_json(socket, {{"result", std::move(result)}});
}

// The path to open an artifact by once the sandbox may have taken the right to open it.
static std::string openable(const std::string &path, const ChildLimits &limits) {
  return limits.sandbox.enabled ? keep_readable(path) : path;
}

void reference_job(int socket, const std::string &path, uint64_t seed, const ChildLimits &limits) {
  const std::string artifact_path = openable(path, limits);
  apply_limits(limits, socket);
  send_phase(socket, "loading");
  LoadedArtifact artifact;
  try {
    artifact = load_artifact(artifact_path);
  } catch (const std::exception &e) {
    send_result(socket, ErrorKind::kLoadError, e.what());
    return;
  }
  restrict_to_running();
  send_phase(socket, "running");
  std::vector<AlignedBuffer> buffers = make_random_buffers(artifact.params, seed, kCheckStream);
  std::vector<void *> args = entry_args(buffers);
  if (int32_t code = artifact.entry(args.data()); code != 0) {
    send_result(socket, ErrorKind::kRuntimeError, "kiln_entry returned error code " + std::to_string(code));
    return;
  }
  send_json(socket, {{"reference", params_to_json(artifact.params)}});
  for (const AlignedBuffer &b : buffers) {
    write_frame(socket, std::string_view(static_cast<const char *>(b.data()), b.size()));
  }
}

static std::string signature_mismatch(const std::vector<ParamSpec> &got, const std::vector<ParamSpec> &want) {
  if (got.size() != want.size()) {
    return "the artifact has " + std::to_string(got.size()) + " params, the reference " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    return param_label(got, i) + " is " + got[i].type_string() + " but the reference's is " + want[i].type_string();
  }
  return "";
}

// Every buffer a call reads or writes, for TimingOptions::flush_args.
static std::vector<MemorySpan> memory_spans(const std::vector<AlignedBuffer> &buffers,
                                            const std::vector<AlignedBuffer> &packed) {
  std::vector<MemorySpan> spans;
  for (const std::vector<AlignedBuffer> *set : {&buffers, &packed})
    for (const AlignedBuffer &buffer : *set) spans.push_back({buffer.data(), buffer.size()});
  return spans;
}

void candidate_job(int socket, const RunInput &input, const ReferenceOutputs *reference, const ChildLimits &limits,
                   CandidateTiming mode) {
  const std::string artifact_path = openable(input.artifact_path, limits);
  apply_limits(limits, socket);
  send_phase(socket, "loading");
  LoadedArtifact artifact;
  try {
    artifact = load_artifact(artifact_path);
  } catch (const std::exception &e) {
    send_result(socket, ErrorKind::kLoadError, e.what());
    return;
  }
  restrict_to_running();

  // The checked call's buffers are timed too when there is a check: inputs the check found
  // unchanged, constants already packed. Filling and packing a second set (a 9 MB weight
  // for a 3x3 512-channel convolution) cost more than the calibration itself.
  std::vector<AlignedBuffer> buffers;
  std::vector<AlignedBuffer> packed;  // made once, before timing: a constant's packing is not timed
  std::vector<void *> args;
  int32_t code = 0;
  auto make_args = [&](uint64_t stream) {
    buffers = make_random_buffers(artifact.params, input.input_seed, stream);
    args = packed_entry_args(artifact, buffers, &packed, &code);
    if (code != 0)
      send_result(socket, ErrorKind::kRuntimeError, "kiln_prepack returned error code " + std::to_string(code));
    return code == 0;
  };
  if (reference != nullptr) {
    if (std::string why = signature_mismatch(artifact.params, reference->params); !why.empty()) {
      send_result(socket, ErrorKind::kLoadError, "signature differs from the reference: " + why);
      return;
    }
    send_phase(socket, "checking");
    if (!make_args(kCheckStream)) return;
    if (code = artifact.entry(args.data()); code != 0) {
      send_result(socket, ErrorKind::kRuntimeError,
                  "kiln_entry returned error code " + std::to_string(code) + " on its first call");
      return;
    }
    // Every parameter is compared, inputs too: a kernel that scribbles on its inputs is
    // wrong even if its outputs happen to match.
    for (size_t i = 0; i < buffers.size(); ++i) {
      auto why = compare_buffer(artifact.params[i], buffers[i].data(), reference->buffers[i], input.tolerance);
      if (!why) continue;
      send_result(socket, ErrorKind::kWrongResult,
                  param_label(artifact.params, i) + " differs from the reference: " + *why);
      return;
    }
  }

  send_phase(socket, "timing");
  if (reference == nullptr && !make_args(kTimingStream)) return;
  std::vector<MemorySpan> spans = memory_spans(buffers, packed);
  TimingOutcome timing = mode == CandidateTiming::kFull ? time_kernel(artifact.entry, args.data(), input.timing, spans)
                                                        : calibrate(artifact.entry, args.data(), input.timing, spans);
  if (timing.failed_code != 0) {
    send_result(socket, ErrorKind::kRuntimeError,
                "kiln_entry returned error code " + std::to_string(timing.failed_code) + " while being timed");
    return;
  }
  send_result(socket, ErrorKind::kNone, "", &timing);
}

void interleaved_timing_job(int socket, const std::vector<InterleavedCandidate> &candidates,
                            const ChildLimits &limits) {
  std::vector<std::string> artifact_paths;
  for (const InterleavedCandidate &c : candidates) artifact_paths.push_back(openable(c.artifact_path, limits));
  apply_limits(limits, socket);
  struct Loaded {
    LoadedArtifact artifact;
    std::vector<AlignedBuffer> packed;
    std::vector<void *> args;
    std::vector<MemorySpan> spans;
    int timed = 0;
    bool failed = false;
  };
  auto fail = [&](size_t i, ErrorKind error, const std::string &message) {
    send_json(socket, {{"failed", i}, {"error", to_string(error)}, {"message", message}});
  };
  std::vector<Loaded> loaded(candidates.size());
  // Buffers by (signature, seed): a batch is one task's candidates, so usually one set.
  std::map<std::string, std::vector<AlignedBuffer>> buffers;
  bool flush_cache = false;
  bool flush_args = false;
  // Every artifact loaded before any of their code runs: then the system calls narrow
  // to what running needs (sandbox.h).
  for (size_t i = 0; i < candidates.size(); ++i) {
    send_json(socket, {{"phase", "loading"}, {"candidate", i}});
    try {
      loaded[i].artifact = load_artifact(artifact_paths[i]);
    } catch (const std::exception &e) {
      loaded[i].failed = true;
      fail(i, ErrorKind::kLoadError, e.what());
    }
  }
  restrict_to_running();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (loaded[i].failed) continue;
    std::string key = params_to_json(loaded[i].artifact.params).dump() + '/' + std::to_string(candidates[i].input_seed);
    auto [it, fresh] = buffers.try_emplace(key);
    if (fresh) it->second = make_random_buffers(loaded[i].artifact.params, candidates[i].input_seed, kTimingStream);
    int32_t code = 0;
    loaded[i].args = packed_entry_args(loaded[i].artifact, it->second, &loaded[i].packed, &code);
    if (code != 0) {
      loaded[i].failed = true;
      fail(i, ErrorKind::kRuntimeError, "kiln_prepack returned error code " + std::to_string(code));
      continue;
    }
    loaded[i].spans = memory_spans(it->second, loaded[i].packed);
    flush_cache = flush_cache || candidates[i].flush_cache;
    flush_args = flush_args || candidates[i].flush_args;
  }
  TimedPasses passes(flush_cache, flush_args);
  int rounds = 0;
  for (const InterleavedCandidate &c : candidates) rounds = std::max(rounds, c.repeat);
  const size_t n = candidates.size();
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      size_t i = (static_cast<size_t>(round) + k) % n;
      Loaded &l = loaded[i];
      if (l.failed || l.timed >= candidates[i].repeat) continue;
      send_json(socket, {{"phase", "timing"}, {"candidate", i}});
      int32_t code = 0;
      std::optional<double> seconds =
          passes.seconds_per_call(l.artifact.entry, l.args.data(), candidates[i].number, &code, l.spans);
      if (!seconds) {
        l.failed = true;
        fail(i, ErrorKind::kRuntimeError,
             "kiln_entry returned error code " + std::to_string(code) + " while being timed");
        continue;
      }
      ++l.timed;
      send_json(socket, {{"candidate", i}, {"seconds", *seconds}});
    }
  }
  send_json(socket, {{"done", true}});
}

}  // namespace kiln::measure::detail
