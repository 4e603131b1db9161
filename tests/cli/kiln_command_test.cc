// The `kiln` executable end to end: real processes, real builds, a real database file.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "executor/tensor_file.h"
#include "ir/host_tensor.h"
#include "target/target.h"

namespace {

namespace fs = std::filesystem;

struct Output {
  int status;
  std::string text;  // stdout and stderr together
};

// `environment` goes to env(1) before the command: "KILN_HOST_CPU=znver3", "-u NAME".
Output kiln(const std::string &args, const std::string &environment = "") {
  std::string cmd = (environment.empty() ? "" : "env " + environment + " ") + std::string(KILN_BINARY_DIR) +
                    "/cli/kiln " + args + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  std::string text;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) text.append(buf.data(), n);
  int status = pclose(p);
  return Output{WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("kiln_cli_test_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// `kiln args` started in the background, its stdout and stderr to `log`; the pid is
// kiln's own (sh and env exec it). `environment` as for kiln().
pid_t start_kiln(const std::string &args, const fs::path &log, const std::string &environment = "") {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    std::string command = "exec " + (environment.empty() ? "" : "env " + environment + " ") +
                          std::string(KILN_BINARY_DIR) + "/cli/kiln " + args;
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  return pid;
}

// What a file holds, "" when it cannot be read.
std::string read_text(const fs::path &path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(KilnCommand, OpsListsTheOperatorLibrary) {
  Output o = kiln("ops");
  EXPECT_EQ(o.status, 0);
  for (const char *op : {"conv2d", "dense", "softmax", "layer_norm", "concat"})
    EXPECT_NE(o.text.find(op), std::string::npos) << op;
}

TEST(KilnCommand, ShowPrintsTheLoopProgramAndKey) {
  Output o = kiln("show --op conv2d --shape 1x3x8x8 --shape 4x3x3x3 --attrs '{\"pads\":[1,1,1,1]}' --key");
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("block pad"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("key: "), std::string::npos);
}

// --constant marks a single operator's weight constant (another key); models' tasks mark
// their weights unless --no-layout-rewrite says the weights may change.
TEST(KilnCommand, ConstantWeightsAreOtherTasks) {
  auto key_of = [](const std::string &text) { return text.substr(text.find("key: ")); };
  Output plain = kiln("show --op dense --shape 8x32 --shape 40x32 --key");
  Output constant = kiln("show --op dense --shape 8x32 --shape 40x32 --constant 1 --key");
  ASSERT_EQ(plain.status, 0) << plain.text;
  ASSERT_EQ(constant.status, 0) << constant.text;
  EXPECT_NE(constant.text.find(R"({"constant":true,"dtype":"float32","shape":[40,32]})"), std::string::npos)
      << constant.text;
  EXPECT_NE(key_of(plain.text), key_of(constant.text));
  Output out_of_range = kiln("show --op dense --shape 8x32 --shape 40x32 --constant 2");
  EXPECT_EQ(out_of_range.status, 1);
  EXPECT_NE(out_of_range.text.find("--constant 2: 'dense' was given 2 inputs"), std::string::npos) << out_of_range.text;

  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/tiny_cnn.onnx";
  Output packed = kiln("import --json --model " + model);
  Output unpacked = kiln("import --json --no-layout-rewrite --model " + model);
  ASSERT_EQ(packed.status, 0) << packed.text;
  ASSERT_EQ(unpacked.status, 0) << unpacked.text;
  EXPECT_NE(packed.text.find("\"constant\""), std::string::npos);
  EXPECT_EQ(unpacked.text.find("\"constant\""), std::string::npos);

  // Winograd by default: tiny_cnn's second convolution becomes three tasks;
  // --no-winograd keeps it direct; an explicit --winograd in NCHW is refused.
  EXPECT_NE(packed.text.find("winograd_output_transform"), std::string::npos) << packed.text;
  Output direct = kiln("import --no-winograd --model " + model);
  ASSERT_EQ(direct.status, 0) << direct.text;
  EXPECT_EQ(direct.text.find("winograd"), std::string::npos) << direct.text;
  EXPECT_EQ(kiln("import --layout NCHW --model " + model).status, 0);
  Output nchw = kiln("import --winograd --layout NCHW --model " + model);
  EXPECT_EQ(nchw.status, 1);
  EXPECT_NE(nchw.text.find("use it with --layout NHWC"), std::string::npos) << nchw.text;
}

// A model with a dynamic sequence length compiled once (--dim sequence=1..20): run on
// the exporter's 16 tokens (padded into a larger bucket) it gives PyTorch's outputs;
// timed at another length; a length outside the range is refused by name; kiln import
// shows the dynamic axes and the buckets.
TEST(KilnCommand, DynamicDimensionsCompileOnceAndRunAnyLength) {
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/bert_ids_dynamic";
  const std::string dir = (temp_dir() / "dynamic.kiln").string();
  Output compiled =
      kiln("compile --model " + model + ".onnx --dim batch=1 --dim sequence=1..20 --buckets 3 --no-db -o " + dir);
  ASSERT_EQ(compiled.status, 0) << compiled.text;
  EXPECT_NE(compiled.text.find("dynamic dimensions: sequence=1..20; buckets:"), std::string::npos) << compiled.text;
  std::string io;
  for (const char *in : {"input_ids", "token_type_ids", "attention_mask"})
    io += std::string(" --input ") + in + "=" + model + ".in." + in + ".npy";
  for (const char *out : {"sequence", "pooled"})
    io += std::string(" --compare ") + out + "=" + model + ".out." + out + ".npy";
  Output ran = kiln("run --compiled " + dir + io);
  ASSERT_EQ(ran.status, 0) << ran.text;
  EXPECT_NE(ran.text.find("output 'sequence': 1x16x32"), std::string::npos) << ran.text;
  Output timed = kiln("bench --compiled " + dir + " --dim sequence=5 --repeat 3");
  ASSERT_EQ(timed.status, 0) << timed.text;
  EXPECT_NE(timed.text.find("at sequence=5 (bucket sequence"), std::string::npos) << timed.text;
  Output outside = kiln("bench --compiled " + dir + " --dim sequence=21 --repeat 1");
  EXPECT_NE(outside.status, 0);
  EXPECT_NE(outside.text.find("'sequence' = 21 (the model takes 1..20) is outside the range"), std::string::npos)
      << outside.text;
  Output imported = kiln("import --model " + model + ".onnx --dim batch=1 --dim sequence=1..20 --buckets 3");
  ASSERT_EQ(imported.status, 0) << imported.text;
  EXPECT_NE(imported.text.find("input  input_ids: 1xsequence"), std::string::npos) << imported.text;
  EXPECT_NE(imported.text.find("output pooled: 1x32"), std::string::npos) << imported.text;
  EXPECT_NE(imported.text.find("sequence20"), std::string::npos) << imported.text;
  EXPECT_NE(imported.text.find("calls run one bucket each, padded (not split: "), std::string::npos) << imported.text;
  // The batch's rows never meet: a call runs as up to two buckets, powers of two.
  Output batch = kiln("import --model " + model + ".onnx --dim batch=1..6 --dim sequence=4");
  ASSERT_EQ(batch.status, 0) << batch.text;
  EXPECT_NE(batch.text.find("calls run as up to 2 buckets, each on its rows along batch"), std::string::npos)
      << batch.text;
  for (const char *bucket : {"batch1 ", "batch2 ", "batch4 ", "batch6 "})
    EXPECT_NE(batch.text.find(bucket), std::string::npos) << bucket << batch.text;
  Output unnamed = kiln("compile --model " + model + ".onnx --dim batch=1 --dim seq=1..20 --no-db -o " + dir);
  EXPECT_NE(unnamed.status, 0);
  EXPECT_NE(unnamed.text.find("--dim names 'seq', which no graph input has as a named dimension"), std::string::npos)
      << unnamed.text;
}

TEST(KilnCommand, BadInputGivesAMessageAndExitCode) {
  Output bad_op = kiln("show --op nosuchop --shape 2x2");
  EXPECT_EQ(bad_op.status, 1);
  EXPECT_NE(bad_op.text.find("unknown operator 'nosuchop'"), std::string::npos) << bad_op.text;
  Output bad_shape = kiln("show --op relu --shape 2xfoo");
  EXPECT_EQ(bad_shape.status, 1);
  EXPECT_NE(bad_shape.text.find("bad shape"), std::string::npos) << bad_shape.text;
  Output bad_target = kiln("measure --op relu --shape 4x4 --target gpu");
  EXPECT_EQ(bad_target.status, 1);
  EXPECT_NE(bad_target.text.find("unknown target kind"), std::string::npos) << bad_target.text;
}

// A schedule with thread bindings, shown for a GPU: its kernels, PTX for the arch, and
// the artifact kiln-cuda-measure runs; on a CPU target, and unbound for a GPU, a clear
// refusal.
TEST(KilnCommand, ShowsGpuKernelsAndPtxForCudaTargets) {
  std::string trace = ::testing::TempDir() + "/relu_gpu_trace.json";
  std::ofstream(trace) << R"({"kiln_trace":1,"decisions":[],"instructions":[["get_block",[],{"name":"relu"},["b0"]],)"
                          R"(["get_loops",["b0"],{},["l1"]],["split",["l1",-1,128],{},["l2","l3"]],)"
                          R"(["bind",["l2"],{"thread":"blockIdx.x"},[]],["bind",["l3"],{"thread":"threadIdx.x"},[]]]})";
  const std::string show = "show --op relu --shape 1000 --trace " + trace + " --target 'cuda -arch=sm_87' --emit ";
  Output kernels = kiln(show + "gpu");
  ASSERT_EQ(kernels.status, 0) << kernels.text;
  EXPECT_NE(kernels.text.find("grid(8, 1, 1) block(128, 1, 1)"), std::string::npos) << kernels.text;
  Output ptx = kiln(show + "ptx");
  ASSERT_EQ(ptx.status, 0) << ptx.text;
  EXPECT_NE(ptx.text.find(".target sm_87"), std::string::npos) << ptx.text;
  EXPECT_NE(ptx.text.find("%ctaid.x"), std::string::npos) << ptx.text;
  Output artifact = kiln(show + "cuda-artifact");
  ASSERT_EQ(artifact.status, 0) << artifact.text;
  EXPECT_NE(artifact.text.find("\"kiln_cuda_artifact\":1"), std::string::npos) << artifact.text;

  Output unbound = kiln("show --op relu --shape 1000 --target 'cuda -arch=sm_87' --emit ptx");
  EXPECT_EQ(unbound.status, 1);
  EXPECT_NE(unbound.text.find("would run on one GPU thread"), std::string::npos) << unbound.text;
  Output cpu = kiln("show --op relu --shape 1000 --trace " + trace + " --emit ptx");
  EXPECT_EQ(cpu.status, 1);
  EXPECT_NE(cpu.text.find("needs a cuda target"), std::string::npos) << cpu.text;

  Output compile =
      kiln("compile --model " + std::string(KILN_SOURCE_DIR) +
           "/tests/frontend/models/tiny_cnn.onnx --target 'cuda -arch=sm_90' -o " + (temp_dir() / "gpu.kiln").string());
  ASSERT_EQ(compile.status, 0) << compile.text;
  EXPECT_NE(compile.text.find(" untuned"), std::string::npos) << compile.text;
  // It runs on this host's GPU, or says why it cannot.
  const std::string models = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/";
  Output run = kiln("run --compiled " + (temp_dir() / "gpu.kiln").string() + " --input " + models +
                    "tiny_cnn.input.bin --compare " + models + "tiny_cnn.ref.bin");
  if (run.status == 0) {
    EXPECT_NE(run.text.find("relative L2 error"), std::string::npos) << run.text;
  } else {
    EXPECT_NE(run.text.find("compiled for a GPU (sm_90) and none can run it here"), std::string::npos) << run.text;
  }

  // Measuring needs this host's GPU, of the target's arch.
  Output measured = kiln("measure --op relu --shape 1000 --trace " + trace + " --target 'cuda -arch=sm_87'");
  if (measured.status == 0) {
    EXPECT_NE(measured.text.find("check:   ok"), std::string::npos) << measured.text;
  } else {
    EXPECT_NE(measured.text.find("on this host"), std::string::npos) << measured.text;
  }
}

// tune-op for a GPU, end to end but for the GPU itself: sampled GPU programs built as
// CUDA artifacts, run by the CUDA runner (here through a stand-in for kiln-cuda-measure
// that reports a time by threads per block), stored under the cuda target.
TEST(KilnCommand, TunesForACudaTargetThroughTheCudaRunner) {
  std::string db = (temp_dir() / "cuda.db").string();
  std::string stand_in = std::string(KILN_SOURCE_DIR) + "/tests/cli/fixtures/stand_in_gpu.py";
  Output tune = kiln("tune-op --op softmax --shape 64x300 --target 'cuda -arch=sm_90' --trials 12 -q --db " + db,
                     "KILN_CUDA_MEASURE=" + stand_in);
  ASSERT_EQ(tune.status, 0) << tune.text;
  // The GPU times its kernels itself: the batch's later parts were built while earlier
  // ones were measured.
  EXPECT_NE(tune.text.find("of builds while measurements ran"), std::string::npos) << tune.text;
  Output key = kiln("show --op softmax --shape 64x300 --key");
  std::string hash = key.text.substr(key.text.find("key: ") + 5, 64);
  Output best = kiln("db best --db " + db + " --workload " + hash + " --target 'cuda -arch=sm_90' --exact --json");
  ASSERT_EQ(best.status, 0) << best.text;
  EXPECT_NE(best.text.find("cuda -arch=sm_90"), std::string::npos) << best.text;
  // The stand-in is fastest at 256 threads per block; the search finds them.
  EXPECT_NE(best.text.find("threadIdx.x"), std::string::npos) << best.text;
}

// KILN_HOST_CPU takes the host for another CPU whose code it runs: AVX2 code (ymm, 8
// lanes) on an AVX-512 host, built, checked and timed there. A CPU whose vectors are
// wider than the host's is refused, and so is a name LLVM does not know.
TEST(KilnCommand, HostCpuStandsInForTheDetectedOne) {
#if defined(__x86_64__)
  const std::string asm_of_relu = "show --op relu --shape 64 --emit asm";
  Output avx2 = kiln(asm_of_relu, "KILN_HOST_CPU=znver3");
  ASSERT_EQ(avx2.status, 0) << avx2.text;
  EXPECT_NE(avx2.text.find("ymm"), std::string::npos) << avx2.text;
  EXPECT_EQ(avx2.text.find("zmm"), std::string::npos) << avx2.text;
  Output measured = kiln("measure --op relu --shape 4096", "KILN_HOST_CPU=znver3");
  EXPECT_EQ(measured.status, 0) << measured.text;
  EXPECT_NE(measured.text.find("check:   ok"), std::string::npos) << measured.text;

  Output unknown = kiln(asm_of_relu, "KILN_HOST_CPU=garbage");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.text.find("the CPU KILN_HOST_CPU names"), std::string::npos) << unknown.text;

  Output detected = kiln(asm_of_relu, "-u KILN_HOST_CPU");
  ASSERT_EQ(detected.status, 0) << detected.text;
  Output wide = kiln(asm_of_relu, "KILN_HOST_CPU=x86-64-v4");
  if (detected.text.find("zmm") != std::string::npos) {
    EXPECT_EQ(wide.status, 0) << wide.text;
    EXPECT_NE(wide.text.find("zmm"), std::string::npos) << wide.text;
  } else {
    EXPECT_EQ(wide.status, 1) << wide.text;
    EXPECT_NE(wide.text.find("which this host"), std::string::npos) << wide.text;
  }
#else
  GTEST_SKIP() << "KILN_HOST_CPU names x86-64 CPUs";
#endif
}

TEST(KilnCommand, NumericFlagsMustBeFiniteAndInRange) {
  struct Case {
    std::string args, says;
  };
  for (const Case &c : std::vector<Case>{
           {"tune-op --trials 0", "give a whole number at least 1"},
           {"tune-op --min-repeat-ms nan", "'nan' is not a finite number"},
           {"tune-op --time nan", "'nan' is not a finite number"},
           {"tune-op --run-timeout 1e10", "out of range"},
           {"tune-op --run-timeout 0", "out of range"},
           {"tune-op --run-timeout -1", "out of range"},
           {"tune-op --eps nan", "'nan' is not a finite number"},
           {"measure --op relu --shape 8 --threads -3", "out of range"},
           {"measure --op relu --shape 8 --run-timeout nan", "'nan' is not a finite number"},
           {"runner --tracker 127.0.0.1:1 --key k --run-timeout inf", "'inf' is not a finite number"},
           {"tracker --heartbeat nan", "'nan' is not a finite number"},
       }) {
    Output o = kiln(c.args);
    EXPECT_EQ(o.status, 1) << c.args << "\n" << o.text;
    EXPECT_NE(o.text.find(c.says), std::string::npos) << c.args << "\n" << o.text;
    EXPECT_LT(o.text.size(), 400u) << c.args << ": the message should be short\n" << o.text;
  }
}

TEST(KilnCommand, ErrorsDoNotQuoteHugeInputsBack) {
  std::string long_shape(5000, '7');
  Output shape = kiln("show --op relu --shape " + long_shape);
  EXPECT_EQ(shape.status, 1) << shape.text.substr(0, 300);
  EXPECT_LT(shape.text.size(), 400u) << shape.text.substr(0, 300);
  Output target = kiln("measure --op relu --shape 8 --target 'llvm -mcpu=" + std::string(5000, 'z') + "'");
  EXPECT_EQ(target.status, 1) << target.text.substr(0, 300);
  EXPECT_LT(target.text.size(), 400u) << target.text.substr(0, 300);
}

TEST(KilnCommand, DemoOfAWorkloadWithNothingToTileIsAnError) {
  fs::path dir = temp_dir();
  std::ofstream(dir / "scalar.json")
      << R"({"inputs":[{"shape":[],"dtype":"float32"}],"ops":[{"op":"relu","attrs":{},"args":["in0"]}],"outputs":["op0"]})";
  std::ofstream(dir / "no_ops.json") << R"({"inputs":[{"shape":[4],"dtype":"float32"}],"ops":[],"outputs":["in0"]})";
  Output scalar = kiln("demo --workload " + (dir / "scalar.json").string());
  EXPECT_EQ(scalar.status, 1) << scalar.text;
  EXPECT_NE(scalar.text.find("nothing to tile"), std::string::npos) << scalar.text;
  Output no_ops = kiln("demo --workload " + (dir / "no_ops.json").string());
  EXPECT_EQ(no_ops.status, 1) << no_ops.text;
  EXPECT_NE(no_ops.text.find("output 'in0' is an input"), std::string::npos) << no_ops.text;
  Output huge = kiln("demo --op matmul --shape 100000000x100000000 --shape 100000000x100000000");
  EXPECT_EQ(huge.status, 1) << huge.text;
  EXPECT_NE(huge.text.find("kiln: error"), std::string::npos) << huge.text;
  fs::remove_all(dir);
}

// Extents near the limits: an element count past int64 is refused where shapes become
// buffers; the interpreter's demo refuses shapes it would spend hours on; a tuning job
// whose buffers cannot fit one run's memory stores no error records.
TEST(KilnCommand, ExtentsNearTheLimitsAreRefusedBeforeAnyWork) {
  fs::path dir = temp_dir() / "extents";
  fs::create_directories(dir);
  Output overflow = kiln("show --op relu --shape 4294967296x4294967296");
  EXPECT_EQ(overflow.status, 1) << overflow.text;
  EXPECT_NE(overflow.text.find("more elements than a program can address"), std::string::npos) << overflow.text;
  Output demo = kiln("demo --op relu --shape 2147483647");
  EXPECT_EQ(demo.status, 1) << demo.text;
  EXPECT_NE(demo.text.find("which is for small shapes"), std::string::npos) << demo.text;
  std::string db = (dir / "t.db").string();
  Output tune = kiln("tune-op --op relu --shape 2147483648 --trials 4 -q --db " + db);
  EXPECT_EQ(tune.status, 1) << tune.text;
  EXPECT_NE(tune.text.find("relu 2147483648 needs 16 GiB for its inputs and outputs alone"), std::string::npos)
      << tune.text;
  EXPECT_NE(tune.text.find("(4 GiB); give a smaller shape, or raise --memory-limit-mb"), std::string::npos)
      << tune.text;
  // A small limit is said in its own unit, not as "0.0 GiB".
  Output small = kiln("tune-op --op relu --shape 1000000 --trials 4 -q --memory-limit-mb 1 --db " + db);
  EXPECT_EQ(small.status, 1) << small.text;
  EXPECT_NE(small.text.find("needs 7.63 MiB for its inputs and outputs alone, more than one run may add on this "
                            "runner (1 MiB)"),
            std::string::npos)
      << small.text;
  // A matmul of 10^8 x 10^8 is refused before the search samples anything of that size.
  Output matmul = kiln(
      "tune-op --op matmul --shape 100000000x100000000 --shape 100000000x100000000 --trials 4 -q "
      "--db " +
      db);
  EXPECT_EQ(matmul.status, 1) << matmul.text;
  EXPECT_NE(matmul.text.find("needs 107 PiB"), std::string::npos) << matmul.text;
  Output stats = kiln("db stats --json --db " + db);
  if (stats.status == 0) EXPECT_NE(stats.text.find("\"records\":0"), std::string::npos) << stats.text;
  fs::remove_all(dir);
}

TEST(KilnCommand, MeasureChecksAndTimesATask) {
  Output o = kiln("measure --op dense --shape 16x32 --shape 24x32 --repeat 2 --min-repeat-ms 1");
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("check:   ok"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("GFLOP/s"), std::string::npos);
}

// A model with three int64 inputs and two outputs: kiln run takes inputs by name or in
// order, writes outputs by name, to files in order or into a folder, compares them, and
// names a missing input and a token id outside the vocabulary.
TEST(KilnCommand, RunFeedsNamedInputsAndWritesEveryOutput) {
  fs::path dir = temp_dir() / "run";
  fs::create_directories(dir);
  const std::string compiled = (dir / "encoder.kiln").string();
  Output compile = kiln(std::string("compile --model ") + KILN_TOKEN_ENCODER_MODEL + " -o " + compiled);
  ASSERT_EQ(compile.status, 0) << compile.text;
  auto ids = [&](const std::string &name, std::vector<int64_t> values) {
    kiln::ir::HostTensor t(kiln::ir::DType::kInt64, {1, 8});
    for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), static_cast<double>(values[i]));
    std::string path = (dir / (name + ".npy")).string();
    kiln::executor::write_tensor_file(path, t);
    return path;
  };
  std::string words = ids("words", {2, 29, 7, 0, 13, 13, 5, 1}), types = ids("types", {0, 0, 0, 0, 1, 1, 1, 1}),
              mask = ids("mask", {1, 1, 1, 1, 1, 1, 0, 0}), bad = ids("bad", {2, 30, 7, 0, 13, 13, 5, 1});
  fs::create_directories(dir / "out");
  Output named = kiln("run --compiled " + compiled + " --input attention_mask=" + mask + " --input input_ids=" + words +
                      " --input token_type_ids=" + types + " --output " + (dir / "out").string());
  ASSERT_EQ(named.status, 0) << named.text;
  EXPECT_NE(named.text.find("output 'context': 1x8x16 float32"), std::string::npos) << named.text;
  EXPECT_NE(named.text.find("output 'probs3': 1x8x8 float32"), std::string::npos) << named.text;
  EXPECT_TRUE(fs::exists(dir / "out" / "context.npy") && fs::exists(dir / "out" / "probs3.npy")) << named.text;

  std::string context = (dir / "context_in_order.npy").string();
  Output ordered = kiln("run --compiled " + compiled + " --input " + words + " --input " + types + " --input " + mask +
                        " --output " + context + " --compare probs3=" + (dir / "out" / "probs3.npy").string() +
                        " --compare " + (dir / "out" / "context.npy").string());
  ASSERT_EQ(ordered.status, 0) << ordered.text;
  EXPECT_TRUE(fs::exists(context)) << ordered.text;
  EXPECT_NE(ordered.text.find("compare 'context': max abs error 0"), std::string::npos) << ordered.text;
  EXPECT_NE(ordered.text.find("compare 'probs3': max abs error 0"), std::string::npos) << ordered.text;

  Output missing = kiln("run --compiled " + compiled + " --input " + words);
  EXPECT_EQ(missing.status, 1) << missing.text;
  EXPECT_NE(missing.text.find("no --input for 'token_type_ids'; the model's inputs are 'input_ids', "
                              "'token_type_ids', 'attention_mask'"),
            std::string::npos)
      << missing.text;
  Output extra = kiln("run --compiled " + compiled + " --input " + words + " --input " + types + " --input " + mask +
                      " --input " + mask);
  EXPECT_EQ(extra.status, 1) << extra.text;
  EXPECT_NE(extra.text.find("is one more file than the model has"), std::string::npos) << extra.text;
  Output out_of_range =
      kiln("run --compiled " + compiled + " --input " + bad + " --input " + types + " --input " + mask);
  EXPECT_EQ(out_of_range.status, 1) << out_of_range.text;
  EXPECT_NE(out_of_range.text.find("input 'input_ids' holds 30 at element 1, but it indexes a table of 30 rows"),
            std::string::npos)
      << out_of_range.text;

  // Mistakes caught before the model runs, each named: a misspelled output or input name
  // (it used to write a file called "nosuch=x.npy", or say the file was missing), two
  // outputs to one file (only the last was kept), a file that never ends, a directory.
  const std::string inputs = " --input " + words + " --input " + types + " --input " + mask;
  Output misspelled = kiln("run --compiled " + compiled + inputs + " --output nosuch=" + (dir / "x.npy").string());
  EXPECT_EQ(misspelled.status, 1) << misspelled.text;
  EXPECT_NE(misspelled.text.find("the model has no output 'nosuch'; its outputs are 'context', 'probs3'"),
            std::string::npos)
      << misspelled.text;
  EXPECT_FALSE(fs::exists("nosuch=" + (dir / "x.npy").string()));
  Output unknown_input =
      kiln("run --compiled " + compiled + " --input input_idz=" + words + " --input " + types + " --input " + mask);
  EXPECT_EQ(unknown_input.status, 1) << unknown_input.text;
  EXPECT_NE(unknown_input.text.find("the model has no input 'input_idz'"), std::string::npos) << unknown_input.text;
  const std::string same = (dir / "same.npy").string();
  Output twice = kiln("run --compiled " + compiled + inputs + " --output context=" + same + " --output probs3=" + same);
  EXPECT_EQ(twice.status, 1) << twice.text;
  EXPECT_NE(twice.text.find("sends outputs 'context' and 'probs3' to one file"), std::string::npos) << twice.text;
  EXPECT_EQ(twice.text.find("ran in"), std::string::npos) << "the model ran first: " << twice.text;
  Output endless =
      kiln("run --compiled " + compiled + " --input input_ids=/dev/zero --input " + types + " --input " + mask);
  EXPECT_EQ(endless.status, 1) << endless.text;
  EXPECT_NE(endless.text.find("'/dev/zero' holds more than"), std::string::npos) << endless.text;
  for (const std::string &empty : {std::string(" --output context="), std::string(" --compare ''")}) {
    Output nothing = kiln("run --compiled " + compiled + inputs + empty);
    EXPECT_EQ(nothing.status, 1) << empty << ": " << nothing.text;
    EXPECT_NE(nothing.text.find("names no file"), std::string::npos) << nothing.text;
  }
  Output over_input = kiln("run --compiled " + compiled + inputs + " --output context=" + words);
  EXPECT_EQ(over_input.status, 1) << over_input.text;
  EXPECT_NE(over_input.text.find("over input file"), std::string::npos) << over_input.text;
  Output directory = kiln("run --compiled " + compiled + " --input input_ids=" + dir.string() + " --input " + types +
                          " --input " + mask);
  EXPECT_EQ(directory.status, 1) << directory.text;
  EXPECT_NE(directory.text.find("is a directory; give a tensor file"), std::string::npos) << directory.text;

  // A small model's latency is printed in microseconds, not as 0.000 ms.
  // --model: the former name of --compiled, still taken.
  Output bench = kiln("bench --model " + compiled + " --repeat 3 --threads 1");
  ASSERT_EQ(bench.status, 0) << bench.text;
  EXPECT_NE(bench.text.find(" us, min "), std::string::npos) << bench.text;
  fs::remove_all(dir);
}

// kiln compile without a database, then kiln bench --profile: a row per step, each saying
// it runs the untuned default.
TEST(KilnCommand, BenchProfilesEveryStep) {
  fs::path dir = temp_dir();
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/tiny_cnn.onnx";
  const std::string compiled = (dir / "tiny_cnn.kiln").string();
  Output compile = kiln("compile --model " + model + " -o " + compiled);
  ASSERT_EQ(compile.status, 0) << compile.text;
  Output bench = kiln("bench --compiled " + compiled + " --repeat 3 --threads 1 --profile");
  ASSERT_EQ(bench.status, 0) << bench.text;
  EXPECT_NE(bench.text.find("per step, median of 3 runs"), std::string::npos) << bench.text;
  size_t untuned_rows = 0;
  for (size_t at = bench.text.find(" untuned "); at != std::string::npos; at = bench.text.find(" untuned ", at + 1))
    ++untuned_rows;
  // tiny_cnn in NHWC: the input transpose, the first convolution, the second as
  // Winograd's input transform, products and output transform, the pool, the transpose
  // back, the flatten and the classifier.
  EXPECT_EQ(untuned_rows, 9u) << bench.text;
  EXPECT_NE(bench.text.find("sum of steps"), std::string::npos) << bench.text;
  fs::remove_all(dir);
}

TEST(KilnCommand, TuneOpStoresResultsAndResumes) {
  fs::path dir = temp_dir();
  std::string db = (dir / "t.db").string();
  std::string task =
      "--op dense --shape 16x32 --shape 24x32 --batch 8 --population 16 --generations 1 "
      "--repeat 2 --min-repeat-ms 1 -q --db " +
      db;
  Output first = kiln("tune-op " + task + " --trials 16 --seed 1");
  ASSERT_EQ(first.status, 0) << first.text;
  EXPECT_NE(first.text.find("measured 16 candidates"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("best: "), std::string::npos) << first.text;
  Output second = kiln("tune-op " + task + " --trials 8 --seed 2");
  ASSERT_EQ(second.status, 0) << second.text;
  EXPECT_NE(second.text.find("measured 8 candidates (0 errors) in "), std::string::npos) << second.text;
  EXPECT_NE(second.text.find(" s, after resuming 16 records from " + db), std::string::npos) << second.text;
  Output stats = kiln("db stats --json --db " + db);
  ASSERT_EQ(stats.status, 0) << stats.text;
  EXPECT_NE(stats.text.find("\"records\":24"), std::string::npos) << stats.text;
  Output records = kiln("db export --db " + db);
  EXPECT_NE(records.text.find("\"measured_by\":{\"hostname\":"), std::string::npos) << records.text.substr(0, 2000);
  EXPECT_NE(records.text.find(",\"runner\":\"local\"}"), std::string::npos) << records.text.substr(0, 2000);

  // A record another tool damaged is passed over with a warning; the job resumes.
  sqlite3 *raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE records SET latencies_json = '[1,' WHERE id = 3", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  Output third = kiln("tune-op " + task + " --trials 8 --seed 3");
  ASSERT_EQ(third.status, 0) << third.text;
  EXPECT_NE(third.text.find("warning: 1 record of the database could not be read and was passed over (first: "
                            "record 3 has latencies that are not a list of positive numbers"),
            std::string::npos)
      << third.text;
  stats = kiln("db stats --json --db " + db);
  EXPECT_NE(stats.text.find("\"unusable\":1"), std::string::npos) << stats.text;
  fs::remove_all(dir);
}

// tune records the pipeline options it prepared the model with; a compile prepared
// another way finds no records for its keys and says which options the database was
// tuned with, and compiling with them uses the records.
TEST(KilnCommand, CompileSaysWhichPipelineTheDatabaseWasTunedWith) {
  fs::path dir = temp_dir() / "pipeline";
  fs::create_directories(dir);
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/mlp.onnx";
  const std::string db = (dir / "mlp.db").string();
  Output tune = kiln("tune --model " + model + " --no-layout-rewrite --trials 16 --batch 8 --population 16 " +
                     "--generations 1 --repeat 2 --min-repeat-ms 1 --confirm-top 0 --no-measure -q --db " + db);
  ASSERT_EQ(tune.status, 0) << tune.text;
  Output records = kiln("db export --db " + db);
  ASSERT_EQ(records.status, 0) << records.text;
  EXPECT_NE(records.text.find(R"("pipeline":{"layout":"NHWC","layout_rewrite":false,"winograd":true})"),
            std::string::npos)
      << records.text.substr(0, 2000);

  Output other = kiln("compile --model " + model + " --db " + db + " -o " + (dir / "a.kiln").string());
  ASSERT_EQ(other.status, 0) << other.text;
  EXPECT_NE(other.text.find("0 with tuned schedules"), std::string::npos) << other.text;
  EXPECT_NE(other.text.find("other pipeline options (--no-layout-rewrite)"), std::string::npos) << other.text;

  Output same =
      kiln("compile --model " + model + " --no-layout-rewrite --db " + db + " -o " + (dir / "b.kiln").string());
  ASSERT_EQ(same.status, 0) << same.text;
  EXPECT_EQ(same.text.find("0 with tuned schedules"), std::string::npos) << same.text;
  EXPECT_EQ(same.text.find("other pipeline options"), std::string::npos) << same.text;
  fs::remove_all(dir);
}

// Code this host cannot run (another architecture) is refused before anything is built
// or stored, pointing at a runner on such a device; the local runner would only store
// load errors.
TEST(KilnCommand, TargetsThisHostCannotRunAreRefusedBeforeBuilding) {
  fs::path dir = temp_dir();
  std::string db = (dir / "foreign.db").string();
  const std::string foreign = "riscv64-linux-gnu";
  for (const std::string &command :
       {"tune-op --op relu --shape 64 --trials 4 -q --db " + db + " --target 'llvm -mtriple=" + foreign + "'",
        "measure --op relu --shape 64 --target 'llvm -mtriple=" + foreign + "'"}) {
    Output o = kiln(command);
    EXPECT_EQ(o.status, 1) << command << "\n" << o.text;
    EXPECT_NE(o.text.find("the local runner cannot measure for target 'llvm -mcpu=generic -mtriple=" + foreign),
              std::string::npos)
        << o.text;
    EXPECT_NE(o.text.find("--runner tracker://HOST:PORT/KEY"), std::string::npos) << o.text;
    EXPECT_EQ(o.text.find("Runtime error"), std::string::npos) << o.text;
  }
  EXPECT_FALSE(fs::exists(db)) << "the database was created";
  // A runner for such a target measures under an emulator (--exec-wrapper) or not at all.
  Output runner = kiln("runner --tracker 127.0.0.1:1 --key board --cache-dir " + (dir / "cache").string() +
                       " --target 'llvm -mtriple=" + foreign + "'");
  EXPECT_EQ(runner.status, 1) << runner.text;
  EXPECT_NE(runner.text.find("this host cannot run code for --target 'llvm -mcpu=generic -mtriple=" + foreign),
            std::string::npos)
      << runner.text;
  EXPECT_NE(runner.text.find("--exec-wrapper"), std::string::npos) << runner.text;
  fs::remove_all(dir);
}

// What a user typed is echoed with its control characters escaped: an ANSI sequence in
// a flag neither colors nor clears the terminal.
TEST(KilnCommand, ErrorsEscapeControlCharactersOfTheInput) {
  for (const std::string &args : {std::string("show --op \"$(printf '\\033[31mred\\033[0m')\" --shape 4"),
                                  std::string("show --op relu --shape \"$(printf '4\\033[2J\\r')\""),
                                  std::string("tune-op --op relu --shape 4 --cost-model \"$(printf '\\033[2J')\"")}) {
    Output o = kiln(args);
    EXPECT_EQ(o.status, 1) << args << "\n" << o.text;
    EXPECT_EQ(o.text.find('\x1b'), std::string::npos) << args << "\n" << o.text;
    EXPECT_EQ(o.text.find('\r'), std::string::npos) << args << "\n" << o.text;
    EXPECT_NE(o.text.find("\\x1b["), std::string::npos) << args << "\n" << o.text;
  }
}

// A misspelled command is named, with the commands there are (CLI11 said only "A
// subcommand is required"); a report folder that cannot be written is refused before
// the job, not after it.
TEST(KilnCommand, MisspelledCommandsAndUnwritableReportsAreSaidAtOnce) {
  Output o = kiln("nosuchcmd --help");
  EXPECT_EQ(o.status, 1) << o.text;
  EXPECT_NE(o.text.find("'nosuchcmd' is not a kiln command; the commands are "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("tune-op"), std::string::npos) << o.text;
  fs::path dir = temp_dir() / "report";
  fs::create_directories(dir);
  std::ofstream(dir / "a_file") << "x";
  Output report = kiln(std::string("tune --model ") + KILN_SOURCE_DIR +
                       "/tests/frontend/models/tiny_cnn.onnx --trials 4 --no-measure -q --db " +
                       (dir / "t.db").string() + " --report " + (dir / "a_file" / "report").string());
  EXPECT_EQ(report.status, 1) << report.text;
  EXPECT_NE(report.text.find("--report: cannot create the report folder"), std::string::npos) << report.text;
  EXPECT_EQ(report.text.find("tuning "), std::string::npos) << "the job ran first: " << report.text;
  // --db '' is a database SQLite would keep in memory only: refused.
  Output no_db = kiln("tune-op --op relu --shape 8 --trials 2 -q --db ''");
  EXPECT_EQ(no_db.status, 1) << no_db.text;
  EXPECT_NE(no_db.text.find("the database path is empty"), std::string::npos) << no_db.text;
  // -o / names no folder (the search for one never ended).
  Output root =
      kiln(std::string("compile --model ") + KILN_SOURCE_DIR + "/tests/frontend/models/two_io.onnx --no-db -o /");
  EXPECT_EQ(root.status, 1) << root.text;
  EXPECT_NE(root.text.find("names no folder to create"), std::string::npos) << root.text;
  // One error, said once: not followed by "Runtime error".
  std::ofstream(dir / "same.token") << "s3cret\n";
  fs::permissions(dir / "same.token", fs::perms::owner_read | fs::perms::owner_write);
  const std::string token = (dir / "same.token").string();
  Output same = kiln("tracker --listen 127.0.0.1:0 --submitter-token-file " + token + " --runner-token-file " + token);
  EXPECT_EQ(same.status, 1) << same.text;
  EXPECT_EQ(same.text.find("Runtime error"), std::string::npos) << same.text;
  fs::remove_all(dir);
}

// Flags and files a careless user gets wrong: each refused with what was wrong, before
// any work, and nothing half-written left behind.
TEST(KilnCommand, CarelessFlagsAndFilesAreRefusedPlainly) {
  fs::path dir = temp_dir() / "careless";
  fs::create_directories(dir / "a_folder");
  const std::string folder = (dir / "a_folder").string();
  auto expect_refused = [](const std::string &args, const std::string &says) {
    Output o = kiln(args);
    EXPECT_EQ(o.status, 1) << args << "\n" << o.text;
    EXPECT_NE(o.text.find(says), std::string::npos) << args << "\n" << o.text;
    EXPECT_EQ(o.text.find("basic_filebuf"), std::string::npos) << o.text;
    EXPECT_EQ(o.text.find("json.exception"), std::string::npos) << o.text;
    EXPECT_EQ(o.text.find("Runtime error"), std::string::npos) << o.text;
  };
  // Negative values for unsigned flags (CLI11 wraps them to 2^64 - 1).
  expect_refused("tune-op --op relu --shape 8 --trials 2 -q --seed -1 --db " + (dir / "t.db").string(),
                 "'-1' is negative");
  expect_refused("show --op dense --shape 4x4 --shape 4x4 --constant -1", "'-1' is negative");
  EXPECT_FALSE(fs::exists(dir / "t.db"));
  // A range check that prints its bound as a number of 309 digits.
  expect_refused("db top --db " + (dir / "none.db").string() + " --workload x -k 0", "give a whole number at least 1");
  // Directories where files go.
  expect_refused("show --workload " + folder, "workload file '" + folder + "' is a directory");
  expect_refused("measure --op relu --shape 8 --trace " + folder, "trace file '" + folder + "' is a directory");
  // Workload files with the wrong types: plain words, not the JSON library's.
  std::ofstream(dir / "bad_types.json") << R"({"inputs": "x", "ops": [], "outputs": []})";
  expect_refused("show --workload " + (dir / "bad_types.json").string(), "\"inputs\" is a list of tensors");
  std::ofstream(dir / "no_outputs.json") << R"({"inputs": [{"shape": [4]}], "ops": [{"op": "relu", "args": ["in0"]}]})";
  expect_refused("show --workload " + (dir / "no_outputs.json").string(), "the workload has no \"outputs\"");
  std::ofstream(dir / "input_out.json")
      << R"({"inputs": [{"shape": [4]}], "ops": [{"op": "relu", "args": ["in0"]}], "outputs": ["in0"]})";
  expect_refused("measure --workload " + (dir / "input_out.json").string(), "output 'in0' is an input");
  std::ofstream(dir / "four_args.json") << R"({"inputs": [{"shape": [4, 4]}, {"shape": [4, 4]}],
      "ops": [{"op": "dense", "args": ["in0", "in1", "in0", "in1"]}], "outputs": ["op0"]})";
  expect_refused("show --workload " + (dir / "four_args.json").string(), "dense takes 2 to 3 inputs, got 4");
  // The same flag twice, where the last would silently win.
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/mlp.onnx";
  expect_refused("import --model " + model + " --shape input=1x784 --shape input=2x784",
                 "--shape input is given twice");
  // A --shape that fixes an axis the model names after a --dim, to another value.
  const std::string ids = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/bert_ids_dynamic.onnx";
  expect_refused("import --model " + ids + " --dim batch=1 --shape input_ids=1x64 --dim sequence=32",
                 "the model names that axis 'sequence', which --dim sets to 32");
  expect_refused("import --model " + ids + " --dim batch=1 --dim sequence=1..99999999999999999999",
                 "is above 1048576, the largest value supported");
  // A tracker address with a negative port; a database that does not exist yet.
  expect_refused("runner --tracker 127.0.0.1:-1 --key k", "has '-1' where the port goes");
  expect_refused("db import --db " + (dir / "new.db").string() + " " + folder, "kiln db import --create");
  // A tracker on a port another program holds: said in one line, without gRPC's log.
  int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr *>(&address), sizeof address), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  ASSERT_EQ(getsockname(holder, reinterpret_cast<sockaddr *>(&address), &length), 0);
  Output busy = kiln("tracker --listen 127.0.0.1:" + std::to_string(ntohs(address.sin_port)));
  close(holder);
  EXPECT_EQ(busy.status, 1) << busy.text;
  EXPECT_NE(busy.text.find("Address already in use"), std::string::npos) << busy.text;
  EXPECT_EQ(busy.text.find("chttp2"), std::string::npos) << busy.text;
  // kiln measure has the memory limit its refusal names.
  Output measure = kiln("measure --op relu --shape 64 --repeat 1 --min-repeat-ms 0 --memory-limit-mb 64");
  EXPECT_EQ(measure.status, 0) << measure.text;
  fs::remove_all(dir);
}

// Where a file cannot be written is said before the work, and a failed export leaves
// neither half of it nor its .partial files.
TEST(KilnCommand, UnwritableDestinationsAreRefusedBeforeTheWork) {
  fs::path dir = temp_dir() / "destinations";
  fs::create_directories(dir / "a_folder");
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/mlp.onnx";
  std::ofstream(dir / "a_file") << "x";
  Output under_a_file = kiln("compile --model " + model + " --no-db -o " + (dir / "a_file" / "m.kiln").string());
  EXPECT_EQ(under_a_file.status, 1) << under_a_file.text;
  EXPECT_NE(under_a_file.text.find("cannot create the folder"), std::string::npos) << under_a_file.text;
  EXPECT_EQ(under_a_file.text.find("filesystem error"), std::string::npos) << under_a_file.text;
  fs::create_symlink(dir / "loop_a", dir / "loop_b");
  fs::create_symlink(dir / "loop_b", dir / "loop_a");
  Output loop = kiln("compile --model " + model + " --no-db -o " + (dir / "loop_a").string());
  EXPECT_EQ(loop.status, 1) << loop.text;
  EXPECT_NE(loop.text.find("is a symbolic link that leads nowhere"), std::string::npos) << loop.text;
  EXPECT_EQ(loop.text.find("filesystem error"), std::string::npos) << loop.text;
  Output compiled = kiln("compile --model " + model + " --no-db -o " + (dir / "mlp.kiln").string());
  ASSERT_EQ(compiled.status, 0) << compiled.text;
  Output run = kiln("run --compiled " + (dir / "mlp.kiln").string() + " --input " + KILN_SOURCE_DIR +
                    "/tests/frontend/models/mlp.input.bin --output " + (dir / "no_such_folder" / "y.npy").string());
  EXPECT_EQ(run.status, 1) << run.text;
  EXPECT_NE(run.text.find("the folder '" + (dir / "no_such_folder").string() + "' does not exist"), std::string::npos)
      << run.text;
  EXPECT_EQ(run.text.find("ran in"), std::string::npos) << "the model ran first: " << run.text;
  // An export whose header cannot be written writes no object file either.
  std::string db = (dir / "t.db").string();
  ASSERT_EQ(kiln("tune-op --op relu --shape 64 --trials 2 -q --db " + db).status, 0);
  std::string key = kiln("show --op relu --shape 64 --key").text;
  key = key.substr(key.find("key: ") + 5, 64);
  Output exported = kiln("export --db " + db + " --workload " + key + " -o " + (dir / "k.o").string() + " --header " +
                         (dir / "a_folder").string());
  EXPECT_EQ(exported.status, 1) << exported.text;
  EXPECT_NE(exported.text.find("is a directory"), std::string::npos) << exported.text;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir))
    EXPECT_TRUE(entry.path().extension() != ".partial" && entry.path().filename() != "k.o") << entry.path();
  fs::remove_all(dir);
}

// A model compiled for another machine is refused naming its target, not with dlopen's
// "cannot open shared object file".
TEST(KilnCommand, AModelCompiledForAnotherArchitectureSaysSo) {
  fs::path dir = temp_dir() / "foreign_model";
  const bool x86_host = kiln::host_triple().rfind("x86_64", 0) == 0;
  const std::string foreign = x86_host ? "aarch64-linux-gnu -mcpu=cortex-a76" : "x86_64-linux-gnu -mcpu=znver3";
  Output compiled = kiln(std::string("compile --model ") + KILN_SOURCE_DIR +
                         "/tests/frontend/models/mlp.onnx --no-db "
                         "--target 'llvm -mtriple=" +
                         foreign + "' -o " + (dir / "m.kiln").string());
  ASSERT_EQ(compiled.status, 0) << compiled.text;
  Output bench = kiln("bench --compiled " + (dir / "m.kiln").string() + " --repeat 1");
  EXPECT_EQ(bench.status, 1) << bench.text;
  EXPECT_NE(bench.text.find("which this host cannot run (it is "), std::string::npos) << bench.text;
  EXPECT_EQ(bench.text.find("cannot open shared object"), std::string::npos) << bench.text;
  fs::remove_all(dir);
}

// A directory given as a model is named as one, not as a file of 2^63 - 1 bytes.
TEST(KilnCommand, ADirectoryAsTheModelIsNamedAsOne) {
  fs::path dir = temp_dir();
  Output o = kiln("import --model " + dir.string());
  EXPECT_EQ(o.status, 1) << o.text;
  EXPECT_NE(o.text.find("'" + dir.string() + "' is a directory"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("9223372036854775807"), std::string::npos) << o.text;
  fs::remove_all(dir);
}

// A tune-op ended by SIGTERM removes its work folder as it ends; the folder of a run
// killed with SIGKILL is removed by the next run.
TEST(KilnCommand, TuneOpWorkFoldersDoNotOutliveTheirRun) {
  fs::path tmp = temp_dir() / "tmp";
  fs::create_directories(tmp);
  // A folder left by a process that is gone.
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  fs::path stale = tmp / ("kiln_tune_" + std::to_string(gone));
  fs::create_directories(stale);
  std::ofstream(stale / "candidate.so") << "x";

  std::string db = (tmp.parent_path() / "stopped.db").string();
  fs::path log = tmp.parent_path() / "stopped.log";
  pid_t tuner = start_kiln(
      "tune-op --op dense --shape 64x64 --shape 64x64 --trials 100000 --batch 4 --repeat 2 "
      "--min-repeat-ms 1 -q --db " +
          db,
      log, "TMPDIR=" + tmp.string());
  fs::path own = tmp / ("kiln_tune_" + std::to_string(tuner));
  // Until the tuner has started building (its folder exists and the stale one is gone).
  for (int i = 0; i < 3000 && !(fs::exists(own) && !fs::exists(stale)); ++i) usleep(20000);
  EXPECT_FALSE(fs::exists(stale)) << "the folder of a process that is gone was kept";
  EXPECT_TRUE(fs::exists(own));
  // And until something was built into it.
  std::error_code ec;
  for (int i = 0; i < 3000 && fs::is_empty(own, ec) && !ec; ++i) usleep(20000);
  EXPECT_FALSE(fs::is_empty(own, ec));
  kill(tuner, SIGTERM);
  int status = 0;
  waitpid(tuner, &status, 0);
  std::string text = read_text(log);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << text;
  EXPECT_FALSE(fs::exists(own)) << "the work folder outlived SIGTERM";
  fs::remove_all(tmp.parent_path());
}

// One number from a SQL query of a database file, -1 when the query fails.
int64_t query_number(const std::string &db, const std::string &sql) {
  sqlite3 *raw = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt *stmt = nullptr;
    if (sqlite3_prepare_v2(raw, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
      value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
  }
  sqlite3_close(raw);
  return value;
}

// The count of the line "measured N candidates in ...", -1 without one.
int64_t measured_count(const std::string &text) {
  size_t at = text.rfind("\nmeasured ");
  if (at == std::string::npos) return -1;
  return std::atoll(text.c_str() + at + std::string("\nmeasured ").size());
}

// A model job stopped by SIGTERM ends after its running round with every measurement
// stored and says how to go on; rerun with the trials it had left, it ends where a job of
// the same size that was never stopped ends: as many records, each program measured
// once, every task of the model tuned, and a compiled model that uses every task's best.
// (The programs themselves differ between any two jobs: the search follows measured
// latencies.) The long-job form of this check is in bench/RESULTS.md.
TEST(KilnCommand, ModelJobStoppedBySigtermResumesToTheEndOfAnUninterruptedOne) {
  fs::path dir = temp_dir() / "stopped_job";
  fs::create_directories(dir);
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/mlp.onnx";
  constexpr int kTrials = 96;
  const std::string flags =
      "--batch 8 --population 16 --generations 1 --repeat 2 --min-repeat-ms 1 --confirm-top 2 --early-stop 0 "
      "--no-measure --model " +
      model;
  const std::string whole_db = (dir / "whole.db").string(), split_db = (dir / "split.db").string();
  Output whole = kiln("tune " + flags + " --trials " + std::to_string(kTrials) + " --db " + whole_db);
  ASSERT_EQ(whole.status, 0) << whole.text;
  ASSERT_EQ(measured_count(whole.text), kTrials) << whole.text;

  const fs::path log = dir / "stopped.log";
  pid_t tuner = start_kiln("tune " + flags + " --trials " + std::to_string(kTrials) + " --db " + split_db, log);
  // Stopped once two rounds are stored.
  for (int i = 0; i < 6000; ++i) {
    std::string text = read_text(log);
    size_t rounds = 0;
    for (size_t at = text.find("[round"); at != std::string::npos; at = text.find("[round", at + 1)) ++rounds;
    if (rounds >= 2 || measured_count(text) >= 0) break;
    usleep(10000);
  }
  kill(tuner, SIGTERM);
  int status = 0;
  waitpid(tuner, &status, 0);
  std::string stopped = read_text(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << stopped;
  EXPECT_NE(stopped.find("interrupted: stopped after the running round; every measurement is stored, a rerun "
                         "resumes"),
            std::string::npos)
      << stopped;
  const int64_t first = measured_count(stopped);
  ASSERT_GT(first, 0) << stopped;
  ASSERT_LT(first, kTrials) << "the job ended before it was stopped:\n" << stopped;
  EXPECT_EQ(query_number(split_db, "SELECT COUNT(*) FROM records"), first);

  Output rest = kiln("tune " + flags + " --trials " + std::to_string(kTrials - first) + " --db " + split_db);
  ASSERT_EQ(rest.status, 0) << rest.text;
  EXPECT_NE(rest.text.find("resumed " + std::to_string(first) + " records from " + split_db), std::string::npos)
      << rest.text;
  EXPECT_EQ(measured_count(rest.text), kTrials - first) << rest.text;

  // The same end: as many records, no program twice, the same tasks, each with a best.
  for (const std::string &db : {whole_db, split_db}) {
    EXPECT_EQ(query_number(db, "SELECT COUNT(*) FROM records"), kTrials) << db;
    EXPECT_EQ(query_number(db, "SELECT COUNT(*) FROM (SELECT DISTINCT workload_id, trace_hash FROM records)"), kTrials)
        << db;
    EXPECT_EQ(query_number(db,
                           "SELECT COUNT(*) FROM workloads WHERE id NOT IN (SELECT workload_id FROM records "
                           "WHERE mean_latency IS NOT NULL)"),
              0)
        << db << ": a task without a measured program";
  }
  EXPECT_EQ(query_number(whole_db, "SELECT COUNT(*) FROM workloads"),
            query_number(split_db, "SELECT COUNT(*) FROM workloads"));
  const fs::path compiled_whole = dir / "whole.kiln", compiled_split = dir / "split.kiln";
  Output a = kiln("compile --model " + model + " --db " + whole_db + " -o " + compiled_whole.string());
  Output b = kiln("compile --model " + model + " --db " + split_db + " -o " + compiled_split.string());
  ASSERT_EQ(a.status, 0) << a.text;
  ASSERT_EQ(b.status, 0) << b.text;
  // "compiled N subgraphs into DIR in S s: T with tuned schedules, U untuned"
  auto tuned = [](const std::string &text) {
    size_t at = text.find(" with tuned schedules, ");
    if (at == std::string::npos) return std::string();
    size_t from = text.rfind(": ", at);
    return text.substr(from + 2, at - from - 2) + " tuned, " + text.substr(at + 23, text.find(' ', at + 23) - at - 23) +
           " untuned";
  };
  EXPECT_FALSE(tuned(a.text).empty()) << a.text;
  EXPECT_EQ(tuned(a.text), tuned(b.text)) << a.text << b.text;
  EXPECT_NE(tuned(a.text).find(" tuned, 0 untuned"), std::string::npos) << a.text;
  fs::remove_all(dir);
}

Output kiln_in(const fs::path &dir, const std::string &args) { return kiln(args, "--chdir=" + dir.string()); }

// tune writes kiln.db by default and compile reads it by default; tune ends with the
// compile command to paste; compile says why a subgraph is untuned when the database
// holds its records for another target only.
TEST(KilnCommand, CompileReadsTheDatabaseTuneWrote) {
  fs::path dir = temp_dir() / "workflow";
  fs::create_directories(dir);
  const std::string model = std::string(KILN_SOURCE_DIR) + "/tests/frontend/models/mlp.onnx";
  Output untuned = kiln_in(dir, "compile --model " + model + " -o first.kiln");
  ASSERT_EQ(untuned.status, 0) << untuned.text;
  EXPECT_NE(untuned.text.find("0 with tuned schedules"), std::string::npos) << untuned.text;
  EXPECT_NE(untuned.text.find("note: no kiln.db here"), std::string::npos) << untuned.text;

  Output tune = kiln_in(dir, "tune --model " + model + " --trials 16 --batch 8 --population 16 --generations 1 " +
                                 "--repeat 2 --min-repeat-ms 1 --confirm-top 0 --no-measure -q");
  ASSERT_EQ(tune.status, 0) << tune.text;
  ASSERT_TRUE(fs::exists(dir / "kiln.db"));
  const std::string next = "next: kiln compile --model " + model + " -o mlp.kiln\n";
  ASSERT_NE(tune.text.find(next), std::string::npos) << tune.text;

  Output tuned = kiln_in(dir, next.substr(std::string("next: kiln ").size()));
  ASSERT_EQ(tuned.status, 0) << tuned.text;
  EXPECT_EQ(tuned.text.find(" 0 with tuned schedules"), std::string::npos) << tuned.text;
  EXPECT_EQ(tuned.text.find("note: no kiln.db"), std::string::npos) << tuned.text;
  EXPECT_TRUE(fs::exists(dir / "mlp.kiln" / "model.json"));

  // The same model for an AArch64 board: the records are x86's, which is said.
  Output other = kiln_in(
      dir, "compile --model " + model + " --target 'llvm -mcpu=neoverse-n1 -mtriple=aarch64-linux-gnu' -o arm.kiln");
  ASSERT_EQ(other.status, 0) << other.text;
  EXPECT_NE(other.text.find("0 with tuned schedules"), std::string::npos) << other.text;
  EXPECT_NE(other.text.find("kiln.db holds records for"), std::string::npos) << other.text;
  EXPECT_NE(other.text.find("compile with --target 'llvm -mcpu="), std::string::npos) << other.text;

  Output none = kiln_in(dir, "compile --model " + model + " --no-db -o none.kiln");
  ASSERT_EQ(none.status, 0) << none.text;
  EXPECT_NE(none.text.find("0 with tuned schedules"), std::string::npos) << none.text;

  Output missing = kiln_in(dir, "compile --model " + model + " --db elsewhere.db -o x.kiln");
  EXPECT_EQ(missing.status, 1) << missing.text;
  EXPECT_NE(missing.text.find("--db elsewhere.db: no such database file"), std::string::npos) << missing.text;
  EXPECT_FALSE(fs::exists(dir / "elsewhere.db"));

  Output onnx = kiln_in(dir, "run --compiled " + model + " --input x.npy");
  EXPECT_EQ(onnx.status, 1) << onnx.text;
  EXPECT_NE(onnx.text.find("is an ONNX model, not a compiled one: compile it first"), std::string::npos) << onnx.text;
  fs::remove_all(dir);
}

// One vocabulary: the same flag names and defaults in every command's help, no
// CLI11 default markers on switches, a version, and the old spellings still taken.
TEST(KilnCommand, HelpTextsShareOneVocabulary) {
  Output version = kiln("--version");
  EXPECT_EQ(version.status, 0) << version.text;
  EXPECT_EQ(version.text.rfind("kiln 0.", 0), 0u) << version.text;
  EXPECT_NE(version.text.find("database schema "), std::string::npos) << version.text;

  const std::vector<std::string> commands = {
      "ops",     "show",    "demo",           "import",  "tune",   "compile",        "run",     "bench",
      "measure", "tune-op", "tracker status", "tracker", "runner", "costmodel eval", "db best", "db import"};
  for (const std::string &command : commands) {
    Output help = kiln(command + " --help");
    ASSERT_EQ(help.status, 0) << command << "\n" << help.text;
    EXPECT_EQ(help.text.find("{false}"), std::string::npos) << command << "\n" << help.text;
    EXPECT_EQ(help.text.find("--tracker-"), std::string::npos) << command << "\n" << help.text;
    EXPECT_EQ(help.text.find("16 matrix products with weights"), std::string::npos) << command;
    EXPECT_EQ(help.text.find("opsets 11-17"), std::string::npos) << command;
    size_t threads = help.text.find("  --threads ");
    if (threads != std::string::npos) {
      std::string line = help.text.substr(threads, help.text.find('\n', help.text.find('\n', threads) + 1) - threads);
      EXPECT_NE(line.find("0, the default: every core of this host"), std::string::npos) << command << "\n" << line;
    }
    size_t target = help.text.find("  --target ");
    if (target != std::string::npos && command != "db best" && command != "costmodel eval") {
      std::string line = help.text.substr(target, help.text.find('\n', help.text.find('\n', target) + 1) - target);
      EXPECT_NE(line.find("default: this host: llvm -mcpu=native"), std::string::npos) << command << "\n" << line;
    }
  }
  for (const std::string &command : {"tune", "tune-op", "tracker status", "runner"}) {
    Output help = kiln(command + " --help");
    for (const char *flag : {"  --token-file ", "  --tls-ca ", "  --insecure "})
      EXPECT_NE(help.text.find(flag), std::string::npos) << command << " lacks " << flag;
  }
  for (const std::string &command : {"run", "bench"}) {
    Output help = kiln(command + " --help");
    EXPECT_NE(help.text.find("  --compiled "), std::string::npos) << help.text;
    EXPECT_EQ(help.text.find("  --model "), std::string::npos) << help.text;
  }
  // The former spelling of the tuner's tracker flags: a missing token file is refused
  // under either name.
  for (const char *flag : {"--token-file", "--tracker-token-file"}) {
    Output o = kiln(std::string("tune-op --op relu --shape 64 --runner tracker://127.0.0.1:1/k ") + flag +
                    " /nonexistent/token -q");
    EXPECT_EQ(o.status, 1) << flag << "\n" << o.text;
    EXPECT_NE(o.text.find("/nonexistent/token"), std::string::npos) << flag << "\n" << o.text;
  }
}

}  // namespace
