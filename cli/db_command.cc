// `kiln db` subcommands: flag parsing and printing only; the work is in
// kiln::db::Database.

#include "cli/db_command.h"
#include "support/file_read.h"
#include "support/flag_checks.h"

#include "database/database.h"
#include "database/prepared_record.h"

#include "ir/schedule/schedule.h"
#include "ir/schedule/trace.h"
#include "ops/workload.h"
#include "support/json_read.h"
#include "te/te.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

namespace kiln::cli {

namespace {

/// Exit code of a lookup that found nothing; distinct from errors so scripts
/// can tell "not tuned yet" from "broken".
constexpr int kExitNotFound = 2;

struct Streams {
  std::ostream &out;
  std::ostream &err;
};

struct LookupOptions {
  std::string db;
  std::string workload;
  std::string target;
  size_t k = 10;
  bool exact = false;
  bool json = false;
};

}  // namespace

// Runs a subcommand body; a DbError becomes a message and exit code 1.
static void run_reporting_errors(const char *name, Streams io, const std::function<void()> &body) {
  try {
    body();
  } catch (const kiln::db::DbError &e) {
    io.err << "kiln db " << name << ": error: " << kiln::support::printable(e.what()) << '\n';
    throw CLI::RuntimeError(1);
  }
}

static nlohmann::json record_json(const kiln::db::Record &r, const std::string &requested_target) {
  nlohmann::json j = {{"id", r.id},
                      {"workload_hash", r.workload.key_hash},
                      {"target", r.target},
                      {"exact_target", r.target == kiln::db::canonical_target(requested_target)},
                      {"mean_latency_s", r.mean_latency()},
                      {"latencies_s", r.latencies()},
                      {"trace", kiln::db::parse_trace(r)},
                      {"kiln_version", r.kiln_version},
                      {"created_at_ms", r.created_at_ms}};
  if (r.confirmed_latency) j["confirmed_latency_s"] = *r.confirmed_latency;
  return j;
}

static std::string microseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f us", seconds * 1e6);
  return text;
}

static CLI::App *add_lookup_flags(CLI::App *cmd, LookupOptions &o) {
  cmd->add_option("--db", o.db, "database file")->required();
  cmd->add_option("--workload", o.workload, "workload key hash, or the canonical workload JSON")->required();
  cmd->add_option("--target", o.target, "target string, e.g. 'llvm -mcpu=skylake -num-cores=4'")->required();
  cmd->add_flag("--exact", o.exact, "only the exact target; no fallback to the same device kind");
  cmd->add_flag("--json", o.json, "print JSON");
  return cmd;
}

static void add_best(CLI::App &db, Streams io) {
  auto o = std::make_shared<LookupOptions>();
  CLI::App *cmd = add_lookup_flags(db.add_subcommand("best", "print the fastest record of a workload on a target"), *o);
  cmd->callback([o, io] {
    run_reporting_errors("best", io, [&] {
      auto database = kiln::db::Database::open(o->db, kiln::db::OpenMode::kReadOnly);
      auto match = o->exact ? kiln::db::TargetMatch::kExactOnly : kiln::db::TargetMatch::kAllowSameDeviceKind;
      std::optional<kiln::db::Record> best =
          database.best(kiln::db::workload_hash_from_argument(o->workload), o->target, match);
      if (!best) {
        io.err << "kiln db best: no successful record for this workload on '" << o->target << "'\n";
        throw CLI::RuntimeError(kExitNotFound);
      }
      nlohmann::json j = record_json(*best, o->target);
      if (o->json) {
        io.out << j.dump() << '\n';
        return;
      }
      io.out << "target:       " << best->target
             << (j["exact_target"].get<bool>() ? "" : "  (fallback: same device kind)")
             << "\nmean latency: " << microseconds(best->mean_latency()) << " over " << best->latencies().size()
             << " repeats\n";
      if (best->confirmed_latency)
        io.out << "confirmed:    " << microseconds(*best->confirmed_latency)
               << " (median of the re-timings beside the other top programs)\n";
      io.out << "record:       " << best->id << "\ntrace:        " << best->trace_json << '\n';
    });
  });
}

static void add_top(CLI::App &db, Streams io) {
  auto o = std::make_shared<LookupOptions>();
  CLI::App *cmd = add_lookup_flags(db.add_subcommand("top", "print the k fastest records of a workload"), *o);
  cmd->add_option("-k", o->k, "how many records")->check(kiln::support::at_least(1));
  cmd->callback([o, io] {
    run_reporting_errors("top", io, [&] {
      auto database = kiln::db::Database::open(o->db, kiln::db::OpenMode::kReadOnly);
      auto match = o->exact ? kiln::db::TargetMatch::kExactOnly : kiln::db::TargetMatch::kAllowSameDeviceKind;
      std::vector<kiln::db::Record> top =
          database.top_k(kiln::db::workload_hash_from_argument(o->workload), o->target, o->k, match);
      if (top.empty()) {
        io.err << "kiln db top: no successful record for this workload on '" << o->target << "'\n";
        throw CLI::RuntimeError(kExitNotFound);
      }
      if (o->json) {
        nlohmann::json list = nlohmann::json::array();
        for (const kiln::db::Record &r : top) list.push_back(record_json(r, o->target));
        io.out << list.dump() << '\n';
        return;
      }
      for (size_t i = 0; i < top.size(); ++i)
        io.out << i + 1 << "  " << microseconds(top[i].mean_latency())
               << (top[i].confirmed_latency ? "  confirmed " + microseconds(*top[i].confirmed_latency) : "")
               << "  record " << top[i].id << "  " << top[i].target << '\n';
    });
  });
}

static void add_stats(CLI::App &db, Streams io) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App *cmd = db.add_subcommand("stats", "count workloads and records per target and error kind");
  cmd->add_option("--db", *path, "database file")->required();
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([path, json, io] {
    run_reporting_errors("stats", io, [&] {
      kiln::db::Stats s = kiln::db::Database::open(*path, kiln::db::OpenMode::kReadOnly).stats();
      if (*json) {
        nlohmann::json j = {{"schema_version", s.schema_version},
                            {"workloads", s.workloads},
                            {"records", s.records},
                            {"successful", s.successful},
                            {"errors", s.errors},
                            {"unusable", s.unusable},
                            {"disputed", s.disputed},
                            {"errors_by_kind", nlohmann::json::object()},
                            {"targets", nlohmann::json::array()}};
        for (const auto &[kind, count] : s.errors_by_kind) j["errors_by_kind"][kind] = count;
        for (const kiln::db::TargetStats &t : s.targets)
          j["targets"].push_back({{"target", t.target}, {"records", t.records}, {"successful", t.successful}});
        io.out << j.dump() << '\n';
        return;
      }
      io.out << "schema version: " << s.schema_version << "\nworkloads:      " << s.workloads
             << "\nrecords:        " << s.records << " (" << s.successful << " successful, " << s.errors
             << " errors)\n";
      if (s.unusable > 0) {
        io.out << "unusable:       " << s.unusable
               << " successful records whose latencies are not positive numbers (written by another tool?); "
                  "lookups pass them over and `kiln db prune` removes them\n";
      }
      if (s.disputed > 0) {
        io.out << "disputed:       " << s.disputed
               << " successful records whose re-timing on another runner of their key disagreed beyond noise; "
                  "lookups and compiles pass them over until a later tuning job re-times them\n";
      }
      // Kinds and targets are text another tool may have written: no escapes reach the terminal.
      for (const auto &[kind, count] : s.errors_by_kind)
        io.out << "  " << kiln::support::printable(kind) << ": " << count << '\n';
      for (const kiln::db::TargetStats &t : s.targets)
        io.out << "target " << kiln::support::printable(t.target) << ": " << t.records << " records, " << t.successful
               << " successful\n";
    });
  });
}

static void add_export(CLI::App &db, Streams io) {
  auto path = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>("-");
  CLI::App *cmd = db.add_subcommand("export", "write every record as JSON Lines");
  cmd->add_option("--db", *path, "database file")->required();
  cmd->add_option("-o,--output", *output, "output file; - for stdout (default)");
  cmd->callback([path, output, io] {
    run_reporting_errors("export", io, [&] {
      auto database = kiln::db::Database::open(*path, kiln::db::OpenMode::kReadOnly);
      if (*output == "-") {
        database.export_jsonl(io.out);
        return;
      }
      std::ofstream file(*output, std::ios::binary | std::ios::trunc);
      if (!file) throw kiln::db::DbError("cannot write " + *output);
      size_t n = database.export_jsonl(file);
      // A full disk shows only when the last buffer is flushed.
      file.close();
      if (!file) throw kiln::db::DbError("cannot write " + *output + ": " + std::strerror(errno));
      io.err << "exported " << n << " records to " << *output << '\n';
    });
  });
}

// A record of a Kiln workload must replay its trace on that workload: a trace that
// names a loop the program does not have would otherwise be found by a compile, as a
// best schedule that cannot be built. Keys that are not Kiln workloads (another tool's)
// are stored as given.
static void check_replays(const kiln::db::Record &record) {
  kiln::ops::Workload workload;
  try {
    workload = kiln::ops::Workload::from_json(kiln::support::parse_json(record.workload.canonical_json));
  } catch (const std::exception &) {
    return;
  }
  try {
    kiln::ir::PrimFunc func = kiln::te::lower(workload.build_dag(), "check");
    kiln::ir::Schedule::replay_stored(func, record.trace_json);
  } catch (const std::exception &e) {
    throw kiln::db::DbError("the trace does not replay on its workload (" + workload.summary() + "): " + e.what() +
                            " (--no-replay-check stores it anyway)");
  }
}

static void add_import(CLI::App &db, Streams io) {
  auto path = std::make_shared<std::string>();
  auto input = std::make_shared<std::string>();
  auto create = std::make_shared<bool>(false);
  auto replay_check = std::make_shared<bool>(true);
  CLI::App *cmd = db.add_subcommand("import", "add records from JSON Lines (all or nothing)");
  cmd->add_option("--db", *path, "database file")->required();
  cmd->add_flag("--create", *create, "create the database if it does not exist");
  cmd->add_flag_callback(
      "--no-replay-check", [replay_check] { *replay_check = false; },
      "store records without replaying each trace on its workload first (by default a record of a Kiln "
      "workload whose trace does not replay refuses the import)");
  cmd->add_option("input", *input, "JSON Lines file; - for stdin")->required();
  cmd->callback([path, input, create, replay_check, io] {
    std::function<void(const kiln::db::Record &)> check;
    if (*replay_check) check = check_replays;
    run_reporting_errors("import", io, [&] {
      auto database =
          kiln::db::Database::open(*path, *create ? kiln::db::OpenMode::kCreate : kiln::db::OpenMode::kReadWrite);
      kiln::db::CommitResult result;
      if (*input == "-") {
        result = database.import_jsonl(std::cin, check);
      } else {
        std::ifstream file;
        try {
          file = kiln::support::open_input_file(*input, "records file", std::ios::binary);
        } catch (const std::invalid_argument &e) {
          throw kiln::db::DbError(e.what());
        }
        result = database.import_jsonl(file, check);
      }
      io.out << "imported " << result.inserted << " records (" << result.duplicates << " already present, skipped)\n";
    });
  });
}

static void add_prune(CLI::App &db, Streams io) {
  auto path = std::make_shared<std::string>();
  auto keep = std::make_shared<size_t>(0);
  CLI::App *cmd = db.add_subcommand("prune",
                                    "keep the N fastest records per workload and target; delete the rest, all error "
                                    "records and records whose latencies are damaged");
  cmd->add_option("--db", *path, "database file")->required();
  cmd->add_option("--keep", *keep, "records to keep per workload and target")
      ->required()
      ->check(kiln::support::at_least(1));
  cmd->callback([path, keep, io] {
    run_reporting_errors("prune", io, [&] {
      size_t deleted = kiln::db::Database::open(*path, kiln::db::OpenMode::kReadWrite).prune(*keep);
      io.out << "deleted " << deleted << " records\n";
    });
  });
}

static void add_retarget(CLI::App &db, Streams io) {
  auto path = std::make_shared<std::string>();
  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  CLI::App *cmd =
      db.add_subcommand("retarget",
                        "move the records of one stored target to another, e.g. records an older Kiln stored under "
                        "-mcpu=native to the CPU that measured them");
  cmd->add_option("--db", *path, "database file")->required();
  cmd->add_option("--from", *from, "stored target, as `kiln db stats` lists it (`native` is kept as written)")
      ->required();
  cmd->add_option("--to", *to, "target the records were measured on (`native`, or `llvm -mcpu=native`: this host)")
      ->required();
  cmd->callback([path, from, to, io] {
    run_reporting_errors("retarget", io, [&] {
      auto [moved, left] = kiln::db::Database::open(*path, kiln::db::OpenMode::kReadWrite).retarget(*from, *to);
      io.out << "moved " << moved << " records";
      if (left > 0) io.out << "; " << left << " stay under the old target (the new one already holds their traces)";
      io.out << '\n';
    });
  });
}

void add_db_commands(CLI::App &app, std::ostream &out, std::ostream &err) {
  CLI::App *db = app.add_subcommand("db", "query and maintain tuning databases");
  db->require_subcommand(1);
  Streams io{out, err};
  add_best(*db, io);
  add_top(*db, io);
  add_stats(*db, io);
  add_export(*db, io);
  add_import(*db, io);
  add_prune(*db, io);
  add_retarget(*db, io);
}

void add_db_commands(CLI::App &app) { add_db_commands(app, std::cout, std::cerr); }

}  // namespace kiln::cli
