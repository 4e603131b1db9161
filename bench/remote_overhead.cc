// What the measurement network costs: the same candidates measured by a LocalRunner in
// this process and through `kiln tracker` + one `kiln runner` on loopback; the
// difference per candidate is the remote path's overhead (upload by digest, dispatch,
// fetch, result delivery). Then the tracker's dispatch throughput: trivial jobs through
// several runners. Timing options are the same on both sides, and minimal, so that the
// overhead is not hidden behind timing.
//
// Usage: kiln_bench_remote_overhead [candidates=200] [throughput_jobs=800] [runners=4]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "codegen/codegen.h"
#include "measure/local_runner.h"
#include "ops/workload.h"
#include "rpc/digest.h"
#include "rpc/remote_runner.h"
#include "te/te.h"
#include "tests/tracker/processes.h"

namespace {

namespace fs = std::filesystem;
using namespace kiln;
using tracker::testing::Process;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

measure::RunInput input_for(const std::string &artifact, const std::string &reference, double min_repeat_ms) {
  measure::RunInput input;
  input.artifact_path = artifact;
  input.reference_artifact_path = reference;
  input.input_seed = 1;
  input.timing.repeat = 1;
  input.timing.min_repeat_ms = min_repeat_ms;
  return input;
}

}  // namespace

int main(int argc, char **argv) {
  int candidates = argc > 1 ? std::atoi(argv[1]) : 200;
  int throughput_jobs = argc > 2 ? std::atoi(argv[2]) : 800;
  int runners = argc > 3 ? std::atoi(argv[3]) : 4;
  fs::path dir = fs::temp_directory_path() / ("kiln-bench-remote-" + std::to_string(getpid()));
  fs::create_directories(dir);

  // Forked before any thread exists; a private lock, as the runners get.
  measure::LocalRunnerOptions local_options;
  local_options.lock_path = dir / "local.lock";
  measure::LocalRunner local(local_options);

  // A dense 64x64x64 kernel; candidates are its bytes plus a distinct tail each, so
  // every one has its own digest and is uploaded and fetched like a tuning candidate.
  ops::Workload w;
  w.inputs = {ir::TensorType{{64, 64}, ir::DType::kFloat32}, ir::TensorType{{64, 64}, ir::DType::kFloat32}};
  w.ops.push_back(ops::OpCall{"dense", nlohmann::json::object(), {"in0", "in1"}});
  w.outputs = {"op0"};
  ir::PrimFunc func = te::lower(w.build_dag(), "main");
  Target target = Target::parse("llvm");
  std::string reference = (dir / "reference.so").string();
  codegen::Compiler compiler;
  compiler.build_artifact(func, target, reference);
  std::string base = rpc::read_file_bytes(reference);
  std::vector<measure::RunInput> batch;
  for (int i = 0; i < candidates; ++i) {
    std::string path = (dir / ("candidate-" + std::to_string(i) + ".so")).string();
    std::ofstream(path, std::ios::binary) << base << "candidate " << i;
    batch.push_back(input_for(path, reference, 1));
  }

  auto start = std::chrono::steady_clock::now();
  std::vector<measure::RunResult> local_results = local.run(batch);
  double local_seconds = seconds_since(start);

  std::string kiln = tracker::testing::kiln_binary();
  Process tracker_process({kiln, "tracker", "--listen", "127.0.0.1:0", "--port-file", (dir / "port").string()},
                          dir / "tracker.log");
  std::string address = "127.0.0.1:" + std::to_string(tracker::testing::wait_for_port(dir / "port"));
  std::vector<std::unique_ptr<Process>> runner_processes;
  auto start_runner = [&](int i, const std::string &key, const std::string &lock) {
    std::string id = key + std::to_string(i);
    runner_processes.push_back(std::make_unique<Process>(
        std::vector<std::string>{kiln, "runner", "--tracker", address, "--key", key, "--runner-id", id, "--cache-dir",
                                 (dir / ("cache-" + id)).string(), "--measurement-lock", lock, "--poll-wait", "5"},
        dir / ("runner-" + id + ".log")));
  };
  start_runner(0, "one", (dir / "remote.lock").string());
  rpc::RemoteRunnerOptions remote_options;
  remote_options.tracker.address = address;
  remote_options.key = "one";
  rpc::RemoteRunner remote(remote_options);
  remote.run({input_for(reference, reference, 1)});  // connection and runner warm-up
  start = std::chrono::steady_clock::now();
  std::vector<measure::RunResult> remote_results = remote.run(batch);
  double remote_seconds = seconds_since(start);

  int failures = 0;
  for (size_t i = 0; i < batch.size(); ++i) failures += !local_results[i].ok() + !remote_results[i].ok();

  // Throughput: trivial jobs (one artifact, no reference, one untimed-length call).
  for (int i = 0; i < runners; ++i) start_runner(i, "many", "");
  remote_options.key = "many";
  rpc::RemoteRunner many(remote_options);
  std::vector<measure::RunInput> trivial(static_cast<size_t>(throughput_jobs), input_for(reference, "", 0));
  many.run({input_for(reference, "", 0)});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // every runner polling
  start = std::chrono::steady_clock::now();
  std::vector<measure::RunResult> trivial_results = many.run(trivial);
  double throughput_seconds = seconds_since(start);
  for (const auto &r : trivial_results) failures += !r.ok();

  runner_processes.clear();
  fs::remove_all(dir);

  std::printf("| measurement | candidates | local s | remote s | added per candidate |\n|---|---|---|---|---|\n");
  std::printf("| dense 64x64x64, check + 1 repeat of >= 1 ms | %d | %.2f | %.2f | %.1f ms |\n", candidates,
              local_seconds, remote_seconds, 1e3 * (remote_seconds - local_seconds) / candidates);
  std::printf("\n| dispatch throughput | jobs | runners | seconds | jobs/s |\n|---|---|---|---|---|\n");
  std::printf("| trivial jobs, no check | %d | %d | %.2f | %.0f |\n", throughput_jobs, runners, throughput_seconds,
              throughput_jobs / throughput_seconds);
  if (failures > 0) {
    std::printf("\n%d measurements failed\n", failures);
    return 1;
  }
  return 0;
}
