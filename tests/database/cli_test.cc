// `kiln db` subcommands, run in-process on real files: output and exit codes.

#include "cli/db_command.h"
#include "database/jsonl.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sstream>

namespace kiln::db {
namespace {

using namespace kiln::db::testing;

struct CliResult {
  int exit_code = 0;
  std::string out;
  std::string err;
};

CliResult run_kiln(std::vector<std::string> args) {
  std::ostringstream out, err;
  CLI::App app{"kiln"};
  app.require_subcommand(1);
  kiln::cli::add_db_commands(app, out, err);
  // CLI11 takes the arguments in reverse order.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  int code = 0;
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError &e) {
    code = app.exit(e, out, err);
  }
  return {code, out.str(), err.str()};
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::open(path, OpenMode::kCreate);
    db.commit({ok_record(1, kSkylake, trace("fast"), {1e-3}), ok_record(1, kSkylake, trace("slow"), {2e-3}),
               error_record(1, kSkylake, trace("bad"), ErrorKind::kBuildError, "no")});
  }
  TempDir dir;
  std::string path = (dir / "t.kdb").string();
  std::string w1 = workload(1).key_hash;
};

TEST_F(Cli, BestPrintsJson) {
  CliResult r = run_kiln({"db", "best", "--db", path, "--workload", w1, "--target", kSkylake, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trace"], nlohmann::json::parse(trace("fast")));
  EXPECT_EQ(j["mean_latency_s"], 1e-3);
  EXPECT_EQ(j["exact_target"], true);
}

TEST_F(Cli, BestAcceptsCanonicalJsonAndPrintsText) {
  CliResult r = run_kiln({"db", "best", "--db", path, "--workload", workload_json(1), "--target", kSkylake});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mean latency: 1000.000 us over 1 repeats"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trace:        " + trace("fast")), std::string::npos) << r.out;
}

TEST_F(Cli, BestNotFoundExitsWithTwo) {
  CliResult r = run_kiln({"db", "best", "--db", path, "--workload", w1, "--target", "cuda -arch=sm_90"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no successful record"), std::string::npos);
  CliResult exact = run_kiln({"db", "best", "--db", path, "--workload", w1, "--target",
                              "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", "--exact"});
  EXPECT_EQ(exact.exit_code, 2);
}

TEST_F(Cli, TopListsFastestFirst) {
  CliResult r = run_kiln({"db", "top", "--db", path, "--workload", w1, "--target", kSkylake, "-k", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["trace"], nlohmann::json::parse(trace("fast")));
  EXPECT_EQ(j[1]["trace"], nlohmann::json::parse(trace("slow")));
}

TEST_F(Cli, StatsJson) {
  CliResult r = run_kiln({"db", "stats", "--db", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["records"], 3);
  EXPECT_EQ(j["errors_by_kind"]["build_error"], 1);
  EXPECT_EQ(j["targets"][0]["target"], kSkylake);
}

TEST_F(Cli, ExportImportPrune) {
  std::string jsonl = (dir / "out.jsonl").string();
  ASSERT_EQ(run_kiln({"db", "export", "--db", path, "-o", jsonl}).exit_code, 0);
  std::string copy = (dir / "copy.kdb").string();
  CliResult no_create = run_kiln({"db", "import", "--db", copy, jsonl});
  EXPECT_EQ(no_create.exit_code, 1);
  EXPECT_NE(no_create.err.find("kiln db import: error: database " + copy + " does not exist"), std::string::npos)
      << no_create.err;
  CliResult imported = run_kiln({"db", "import", "--db", copy, "--create", jsonl});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(imported.out, "imported 3 records (0 already present, skipped)\n");
  CliResult pruned = run_kiln({"db", "prune", "--db", copy, "--keep", "1"});
  ASSERT_EQ(pruned.exit_code, 0) << pruned.err;
  EXPECT_EQ(pruned.out, "deleted 2 records\n");
}

// A record of a real Kiln workload whose trace does not replay on it (it names a block
// the program does not have) is refused at import, naming the line; --no-replay-check
// stores it anyway (a compile then passes it over with a warning).
TEST_F(Cli, ImportReplaysTracesOnKilnWorkloads) {
  const std::string relu = R"({"inputs":[{"dtype":"float32","shape":[16]}],"kiln_workload":1,)"
                           R"("ops":[{"args":["in0"],"attrs":{},"op":"relu"}],"outputs":["op0"]})";
  Record good =
      ok_record(1, kSkylake,
                R"({"decisions":[],"instructions":[["get_block",[],{"name":"relu"},["b0"]]],"kiln_trace":1})", {1e-6});
  good.workload = Workload{support::sha256_hex(relu), relu, "relu", "16"};
  Record bad = good;
  bad.trace_json =
      R"({"decisions":[],"instructions":[["get_block",[],{"name":"no_such_block"},["b0"]]],"kiln_trace":1})";
  std::string jsonl = (dir / "replay.jsonl").string();
  std::ofstream(jsonl) << record_to_jsonl(good) << '\n' << record_to_jsonl(bad) << '\n';
  CliResult refused = run_kiln({"db", "import", "--db", path, jsonl});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("import line 2: the trace does not replay on its workload (relu"), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("nothing was imported"), std::string::npos) << refused.err;
  EXPECT_EQ(Database::open(path, OpenMode::kReadOnly).stats().records, 3);
  CliResult forced = run_kiln({"db", "import", "--db", path, "--no-replay-check", jsonl});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(Database::open(path, OpenMode::kReadOnly).stats().records, 5);
}

// The README promises every line is validated: a trace that compilers could not
// replay must not become the workload's best schedule.
TEST_F(Cli, ImportRefusesALineWhoseTraceIsNotATrace) {
  nlohmann::json bogus = nlohmann::json::parse(record_to_jsonl(ok_record(1, kSkylake, trace("x"), {1e-6})));
  bogus["trace"] = "hello";
  std::string jsonl = (dir / "bogus.jsonl").string();
  std::ofstream(jsonl) << record_to_jsonl(ok_record(1, kSkylake, trace("fine"), {5e-4})) << '\n'
                       << bogus.dump() << '\n';
  CliResult r = run_kiln({"db", "import", "--db", path, jsonl});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("import line 2: field \"trace\" is not a Kiln trace: a trace is a JSON object with an "
                       "\"instructions\" array; nothing was imported"),
            std::string::npos)
      << r.err;
  CliResult best = run_kiln({"db", "best", "--db", path, "--workload", w1, "--target", kSkylake, "--json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  EXPECT_EQ(nlohmann::json::parse(best.out)["trace"], nlohmann::json::parse(trace("fast")));
  EXPECT_EQ(Database::open(path, OpenMode::kReadOnly).stats().records, 3);
}

// best, top, stats and export open the file read-only: they must work where the
// folder cannot be written, so they make no -wal or -shm file and change nothing.
TEST_F(Cli, LookupsWriteNothing) {
  std::string before = read_bytes(path);
  for (std::vector<std::string> args : {std::vector<std::string>{"best", "--workload", w1, "--target", kSkylake},
                                        std::vector<std::string>{"top", "--workload", w1, "--target", kSkylake},
                                        std::vector<std::string>{"stats"}, std::vector<std::string>{"export"}}) {
    std::string command = args[0];
    args.insert(args.begin(), "db");
    args.insert(args.end(), {"--db", path});
    CliResult r = run_kiln(args);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(path + "-wal")) << command;
    EXPECT_FALSE(std::filesystem::exists(path + "-shm")) << command;
  }
  EXPECT_EQ(read_bytes(path), before);
}

// Records an older Kiln stored under -mcpu=native move to the CPU that measured them;
// a trace the new target already holds stays behind, and devices never cross kinds.
TEST_F(Cli, RetargetMovesLegacyNativeRecords) {
  const char *legacy = "llvm -mcpu=native -mtriple=x86_64-linux-gnu -num-cores=4";
  std::string jsonl = (dir / "legacy.jsonl").string();
  std::ofstream(jsonl) << record_to_jsonl(ok_record(1, legacy, trace("old"), {5e-4})) << '\n'
                       << record_to_jsonl(ok_record(1, legacy, trace("fast"), {5e-4})) << '\n';
  ASSERT_EQ(run_kiln({"db", "import", "--db", path, jsonl}).exit_code, 0);
  CliResult moved = run_kiln({"db", "retarget", "--db", path, "--from", legacy, "--to", kSkylake});
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  EXPECT_EQ(moved.out, "moved 1 records; 1 stay under the old target (the new one already holds their traces)\n");
  CliResult best = run_kiln({"db", "best", "--db", path, "--workload", w1, "--target", kSkylake, "--exact", "--json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  EXPECT_NE(best.out.find("old"), std::string::npos) << best.out;
  CliResult cross = run_kiln(
      {"db", "retarget", "--db", path, "--from", legacy, "--to", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78"});
  EXPECT_EQ(cross.exit_code, 1);
  EXPECT_NE(cross.err.find("another kind of device"), std::string::npos) << cross.err;
  // The same target on both sides moves nothing, and says so instead of "moved 1".
  CliResult same = run_kiln({"db", "retarget", "--db", path, "--from", kSkylake, "--to", kSkylake});
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_NE(same.err.find("--from and --to are the same target"), std::string::npos) << same.err;
  // `native` alone, as --help offers it: this host.
  CliResult native = run_kiln({"db", "retarget", "--db", path, "--from", legacy, "--to", "native"});
  EXPECT_EQ(native.exit_code, 0) << native.err;
  EXPECT_EQ(native.out.rfind("moved 1 records", 0), 0u) << native.out;
}

TEST_F(Cli, BadInputFailsWithMessage) {
  std::string junk = (dir / "junk.jsonl").string();
  std::ofstream(junk) << "{}\n";
  CliResult r = run_kiln({"db", "import", "--db", path, junk});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("import line 1: missing field \"format\""), std::string::npos) << r.err;

  CliResult bad_target = run_kiln({"db", "best", "--db", path, "--workload", w1, "--target", "llvm -q"});
  EXPECT_EQ(bad_target.exit_code, 1);
  EXPECT_NE(bad_target.err.find("bad flag '-q'"), std::string::npos) << bad_target.err;

  // A malformed workload is a bad argument (exit 1), not "not found" (exit 2).
  CliResult bad_workload = run_kiln({"db", "best", "--db", path, "--workload", "{bad json", "--target", kSkylake});
  EXPECT_EQ(bad_workload.exit_code, 1);
  EXPECT_NE(bad_workload.err.find("bad workload '{bad json': not valid JSON"), std::string::npos) << bad_workload.err;
  CliResult short_hash = run_kiln({"db", "best", "--db", path, "--workload", "12ab", "--target", kSkylake});
  EXPECT_EQ(short_hash.exit_code, 1);
  EXPECT_NE(short_hash.err.find("expected a key hash (64 lowercase hex digits)"), std::string::npos) << short_hash.err;

  CliResult missing_flag = run_kiln({"db", "best", "--db", path});
  EXPECT_NE(missing_flag.exit_code, 0);
  CliResult zero_keep = run_kiln({"db", "prune", "--db", path, "--keep", "0"});
  EXPECT_NE(zero_keep.exit_code, 0);
  EXPECT_EQ(Database::open(path, OpenMode::kReadOnly).stats().records, 3);
}

}  // namespace
}  // namespace kiln::db
