// What other programs link: kernels built as relocatable objects under the caller's
// names (kiln export), and compiled models' steps that record their dependency on
// libkiln_runtime.so.1, for each ISA Kiln's hosts have and for AArch64.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/codegen.h"
#include "codegen/runtime/abi.h"
#include "te/te.h"
#include "tests/common/packed_dense.h"

namespace kiln::codegen {
namespace {

constexpr uint16_t kElfX86_64 = 62, kElfAArch64 = 183;

uint16_t elf_machine(const std::string &bytes) {
  if (bytes.size() < 20 || bytes.compare(0, 4,
                                         "\x7f"
                                         "ELF") != 0)
    return 0;
  uint16_t machine;
  std::memcpy(&machine, bytes.data() + 18, sizeof machine);  // little-endian on every target here
  return machine;
}

std::string read_file(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

ir::PrimFunc packed_dense() {
  ir::PrimFunc unscheduled = te::lower(test_support::dense_workload(7, 37, 24, true).build_dag(), "dense");
  return test_support::packed_dense_schedule(unscheduled, 16, false).func();
}

void expect_named_object(const Target &target, uint16_t machine) {
  KernelObject object = Compiler().build_object(packed_dense(), target, "my_dense");
  EXPECT_EQ(elf_machine(object.object), machine) << target.str();
  EXPECT_TRUE(object.has_prepack) << target.str();
  for (const char *symbol : {"my_dense", "my_dense_prepack", "my_dense_info"})
    EXPECT_NE(object.object.find(symbol), std::string::npos) << symbol << " on " << target.str();
  EXPECT_EQ(object.object.find(KILN_ENTRY_SYMBOL), std::string::npos) << target.str();
  EXPECT_EQ(object.object.find(KILN_PREPACK_SYMBOL), std::string::npos) << target.str();
  nlohmann::json info = nlohmann::json::parse(object.info_json);
  EXPECT_EQ(info["params"][1]["packed_from"]["shape"], (std::vector<int64_t>{37, 24})) << target.str();
}

void expect_runtime_dependency_only_when_asked(const Target &target, uint16_t machine) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln_export_object_test_" + std::to_string(getpid()) + "_" + std::to_string(machine));
  std::filesystem::create_directories(dir);
  Compiler compiler;
  compiler.build_artifact(packed_dense(), target, (dir / "step.so").string(), /*needs_runtime_library=*/true);
  compiler.build_artifact(packed_dense(), target, (dir / "candidate.so").string());
  std::string step = read_file(dir / "step.so"), candidate = read_file(dir / "candidate.so");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(elf_machine(step), machine) << target.str();
  EXPECT_NE(step.find("libkiln_runtime.so.1"), std::string::npos) << "a step without its NEEDED runtime";
  EXPECT_EQ(candidate.find("libkiln_runtime.so.1"), std::string::npos) << "a candidate that needs the runtime file";
}

TEST(CodegenX86Export, ObjectsCarryTheCallersNamesOnEveryIsa) {
  for (const char *target : {"llvm -mcpu=znver3 -mtriple=x86_64-linux-gnu -num-cores=2",
                             "llvm -mcpu=sapphirerapids -mtriple=x86_64-linux-gnu -num-cores=2"}) {
    expect_named_object(Target::parse(target), kElfX86_64);
    expect_runtime_dependency_only_when_asked(Target::parse(target), kElfX86_64);
  }
  EXPECT_THROW(Compiler().build_object(packed_dense(), Target::parse("llvm -mcpu=znver3"), "2fast"), CodegenError);
}

TEST(CodegenAArch64Export, ObjectsAndStepsAreBuiltForTheBoardsArchitecture) {
  const Target board = Target::parse("llvm -mcpu=neoverse-n1 -mtriple=aarch64-linux-gnu -num-cores=4");
  expect_named_object(board, kElfAArch64);
  expect_runtime_dependency_only_when_asked(board, kElfAArch64);
}

}  // namespace
}  // namespace kiln::codegen
