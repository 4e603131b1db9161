// Tensor files for kiln run: .npy files NumPy wrote (fixtures/), conversions that are
// safe, refusals that say what to do, raw files, and damaged files that never crash.
#include "executor/tensor_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace kiln::executor {
namespace {

std::string fixture(const std::string &name) {
  return std::string(KILN_SOURCE_DIR) + "/tests/executor/fixtures/" + name;
}

std::string scratch(const std::string &name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_tensor_file_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string &path, const std::string &bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string error_of(const std::string &path, const ir::TensorType &want) {
  try {
    read_tensor_file(path, want);
  } catch (const TensorFileError &e) {
    return e.what();
  }
  return "<read>";
}

const ir::TensorType kF32{{2, 3}, ir::DType::kFloat32};

TEST(TensorFile, ReadsWhatNumPyWrote) {
  for (const char *name : {"f32_2x3.npy", "f64_2x3.npy"}) {
    ir::HostTensor t = read_tensor_file(fixture(name), kF32);
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t.get(i), 0.5 * static_cast<double>(i) - 1) << name;
  }
  ir::HostTensor wide = read_tensor_file(fixture("i64_4.npy"), {{4}, ir::DType::kInt64});
  EXPECT_EQ(wide.get(3), 1099511627776.0);
  EXPECT_EQ(read_tensor_file(fixture("scalar.npy"), {{}, ir::DType::kFloat32}).get(0), 2.5);
}

TEST(TensorFile, WritesWhatNumPyWrites) {
  ir::HostTensor t = read_tensor_file(fixture("f32_2x3.npy"), kF32);
  std::string path = scratch("written.npy");
  write_tensor_file(path, t);
  EXPECT_EQ(slurp(path), slurp(fixture("f32_2x3.npy")));  // byte for byte, header padding included
  std::string raw = scratch("written.bin");
  write_tensor_file(raw, t);
  EXPECT_EQ(slurp(raw).size(), 24u);
  EXPECT_EQ(read_tensor_file(raw, kF32).get(5), 1.5);
}

TEST(TensorFile, RefusalsSayWhatToDo) {
  EXPECT_NE(error_of(fixture("fortran_2x3.npy"), kF32).find("Fortran order; save it C-ordered"), std::string::npos);
  EXPECT_NE(error_of(fixture("big_endian_2x3.npy"), kF32).find("big-endian"), std::string::npos);
  EXPECT_NE(error_of(fixture("f32_2x3.npy"), {{3, 2}, ir::DType::kFloat32})
                .find("has shape (2, 3); the tensor it is read as has (3, 2)"),
            std::string::npos);
  EXPECT_NE(error_of(fixture("i64_4.npy"), {{4}, ir::DType::kInt32}).find("element 3 (1099511627776) does not fit"),
            std::string::npos);
  EXPECT_NE(error_of(fixture("f32_2x3.npy"), {{2, 3}, ir::DType::kInt32}).find("astype('<i4')"), std::string::npos);
  EXPECT_NE(error_of(fixture("nothing_here.npy"), kF32).find("cannot open"), std::string::npos);
  std::string raw = scratch("short.bin");
  spit(raw, std::string(20, '\0'));
  EXPECT_NE(error_of(raw, kF32).find("holds 20 bytes; the tensor needs 24"), std::string::npos);
  std::string truncated = scratch("truncated.npy");
  spit(truncated, slurp(fixture("f32_2x3.npy")).substr(0, 140));
  EXPECT_NE(error_of(truncated, kF32).find("holds 12 bytes of data"), std::string::npos);
  std::string huge_header = slurp(fixture("f32_2x3.npy"));
  huge_header[8] = '\xff';
  huge_header[9] = '\xff';
  spit(truncated, huge_header);
  EXPECT_NE(error_of(truncated, kF32).find("runs past the file"), std::string::npos);
}

// A file that never ends (/dev/zero) is refused once it is longer than any file of the
// tensor's size, not read until memory runs out; a directory is said to be one.
TEST(TensorFile, EndlessFilesAndDirectoriesAreRefused) {
  std::string endless = error_of("/dev/zero", kF32);
  EXPECT_NE(endless.find("holds more than"), std::string::npos) << endless;
  EXPECT_NE(endless.find("a tensor of float32 (2, 3)"), std::string::npos) << endless;
  EXPECT_THROW(read_npy_file("/dev/zero", ir::DType::kFloat32, 1000), TensorFileError);
  std::string directory = error_of(std::filesystem::temp_directory_path().string(), kF32);
  EXPECT_NE(directory.find("is a directory"), std::string::npos) << directory;
}

// float64 values beyond float32's range become infinite with a warning that counts them.
TEST(TensorFile, Float64BeyondFloat32WarnsOfInfinities) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  for (double v : {1e300, 2.0, -1e39}) bytes.append(reinterpret_cast<const char *>(&v), 8);
  std::string path = scratch("f64_large.npy");
  spit(path, bytes);
  std::vector<std::string> warnings;
  ir::HostTensor t = read_tensor_file(path, {{3}, ir::DType::kFloat32}, &warnings);
  EXPECT_EQ(t.get(1), 2.0);
  EXPECT_TRUE(std::isinf(t.get(0)));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("2 float64 value(s) beyond float32's range became infinite (element 0: 1e+300)"),
            std::string::npos)
      << warnings[0];
  warnings.clear();
  read_tensor_file(fixture("f64_2x3.npy"), kF32, &warnings);
  EXPECT_TRUE(warnings.empty());
}

TEST(TensorFile, DamagedFilesAreRefusedNeverCrash) {
  const std::string good = slurp(fixture("f32_2x3.npy"));
  std::string path = scratch("damaged.npy");
  std::mt19937_64 rng(11);
  int refused = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::string bytes = good;
    if (trial < static_cast<int>(good.size())) {
      bytes.resize(static_cast<size_t>(trial));  // every truncation
    } else {
      for (int flips = 0; flips < 3; ++flips) bytes[rng() % 128] = static_cast<char>(rng());  // the header
    }
    spit(path, bytes);
    try {
      read_tensor_file(path, kF32);
    } catch (const TensorFileError &) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 150);
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
}  // namespace kiln::executor
