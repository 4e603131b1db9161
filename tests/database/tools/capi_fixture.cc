// Writes the database the C API test (capi_lookup.c) reads. The values here
// and the expectations there must agree.
//
// usage: kiln_db_capi_fixture DB

#include "database/database.h"

#include <cstdio>
#include <filesystem>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DB\n", argv[0]);
    return 2;
  }
  try {
    std::filesystem::remove(argv[1]);
    auto db = kiln::db::Database::open(argv[1], kiln::db::OpenMode::kCreate);
    auto record = [](const char *target, const char *trace, std::vector<double> latencies) {
      kiln::db::Record r;
      r.workload.canonical_json = R"({"ops":[{"op":"dense","shape":[128,256,512]}],"version":1})";
      r.target = target;
      r.trace_json = trace;
      r.outcome = std::move(latencies);
      return r;
    };
    const char *skylake = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -num-cores=4";
    // A second workload where the re-timing confirmed the slower-measured program.
    kiln::db::Record lucky = record(skylake, R"({"tile":[2,2]})", {1.0e-4});
    lucky.workload.canonical_json = R"({"ops":[{"op":"dense","shape":[64,64,64]}],"version":1})";
    kiln::db::Record confirmed = lucky;
    confirmed.trace_json = R"({"tile":[4,4]})";
    confirmed.outcome = std::vector<double>{2.0e-4};
    confirmed.confirmed_latency = 1.5e-4;
    confirmed.metadata.packed_inputs = nlohmann::json::parse(R"([{"input":1,"shape":[4,64,16]}])");
    kiln::db::Record failed = record(skylake, R"({"tile":[1,1]})", {});
    failed.outcome = kiln::db::MeasureError{kiln::db::ErrorKind::kRunTimeout, "timed out"};
    db.commit({
        record(skylake, R"({"tile":[8,32]})", {2.0e-4, 3.0e-4}),  // mean 2.5e-4: the best
        record(skylake, R"({"tile":[4,16]})", {5.0e-4}),
        failed,
        record("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a78 -num-cores=4", R"({"tile":[2,8]})", {1.0e-3}),
        lucky,
        confirmed,
    });
  } catch (const std::exception &e) {
    std::fprintf(stderr, "capi fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
