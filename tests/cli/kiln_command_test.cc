// The `kiln` executable end to end: real processes, real builds, a real database file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Output {
  int status;
  std::string text;  // stdout and stderr together
};

Output kiln(const std::string &args) {
  std::string cmd = std::string(KILN_BINARY_DIR) + "/cli/kiln " + args + " 2>&1";
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

TEST(KilnCommand, MeasureChecksAndTimesATask) {
  Output o = kiln("measure --op dense --shape 16x32 --shape 24x32 --repeat 2 --min-repeat-ms 1");
  EXPECT_EQ(o.status, 0) << o.text;
  EXPECT_NE(o.text.find("check:   ok"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("GFLOP/s"), std::string::npos);
}

TEST(KilnCommand, TuneOpStoresResultsAndResumes) {
  fs::path dir = temp_dir();
  std::string db = (dir / "t.db").string();
  std::string task = "--op dense --shape 16x32 --shape 24x32 --batch 8 --population 16 --generations 1 "
                     "--repeat 2 --min-repeat-ms 1 -q --db " + db;
  Output first = kiln("tune-op " + task + " --trials 16 --seed 1");
  ASSERT_EQ(first.status, 0) << first.text;
  EXPECT_NE(first.text.find("measured 16 candidates"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("best: "), std::string::npos) << first.text;
  Output second = kiln("tune-op " + task + " --trials 8 --seed 2");
  ASSERT_EQ(second.status, 0) << second.text;
  Output stats = kiln("db stats --json --db " + db);
  ASSERT_EQ(stats.status, 0) << stats.text;
  EXPECT_NE(stats.text.find("\"records\":24"), std::string::npos) << stats.text;
  fs::remove_all(dir);
}

}  // namespace
