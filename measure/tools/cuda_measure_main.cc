// kiln-cuda-measure: runs a CUDA artifact (NAME.cuda.json, `kiln` writes them) on the
// GPU of this host through the driver API and prints its timing as one JSON line. A
// process per artifact: a kernel fault leaves the CUDA context unusable, so whoever
// measures many candidates starts this again for the next one.
//
//   kiln-cuda-measure ARTIFACT [--device N] [--seed S] [--repeats N] [--number N]
//                     [--no-flush] [--save DIR]
//   kiln-cuda-measure --probe [--device N]     the GPU as JSON, or exit 3 saying why none
//
// Inputs are seeded random values (floats uniform in [-1, 1], integers in [-4, 4]);
// --save writes them and the outputs as DIR/<buffer>.npy, for a reference to check.
// Exit status: 0 measured, 2 bad arguments or artifact, 3 no GPU here, 4 a CUDA error
// (5 when it was a fault that lost the context).
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device/cuda_driver.h"

namespace {

using kiln::device::CudaArtifact;
using kiln::device::CudaArtifactBuffer;

uint64_t splitmix(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<uint8_t> random_bytes(const CudaArtifactBuffer &b, uint64_t seed) {
  std::vector<uint8_t> bytes(static_cast<size_t>(b.bytes()));
  int64_t n = b.bytes() / kiln::ir::dtype_bytes(b.dtype);
  uint64_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = splitmix(state);
    double unit = static_cast<double>(r >> 11) / static_cast<double>(uint64_t{1} << 53);
    switch (b.dtype) {
      case kiln::ir::DType::kFloat32: {
        float v = static_cast<float>(unit * 2 - 1);
        std::memcpy(&bytes[static_cast<size_t>(i) * 4], &v, 4);
        break;
      }
      case kiln::ir::DType::kInt32: {
        int32_t v = static_cast<int32_t>(r % 9) - 4;
        std::memcpy(&bytes[static_cast<size_t>(i) * 4], &v, 4);
        break;
      }
      case kiln::ir::DType::kInt64: {
        int64_t v = static_cast<int64_t>(r % 9) - 4;
        std::memcpy(&bytes[static_cast<size_t>(i) * 8], &v, 8);
        break;
      }
      case kiln::ir::DType::kInt8:
        bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(r % 9) - 4));
        break;
      case kiln::ir::DType::kBool:
        bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(r & 1);
        break;
      case kiln::ir::DType::kFloat16:
      case kiln::ir::DType::kBFloat16:
        throw std::invalid_argument(std::string(kiln::ir::dtype_name(b.dtype)) +
                                    " inputs are not generated yet (buffer '" + b.name + "')");
    }
  }
  return bytes;
}

// A .npy file (format 1.0) of the buffer's bytes.
void write_npy(const std::string &path, const CudaArtifactBuffer &b, const std::vector<uint8_t> &bytes) {
  const char *descr = "<f4";
  switch (b.dtype) {
    case kiln::ir::DType::kInt32:
      descr = "<i4";
      break;
    case kiln::ir::DType::kInt64:
      descr = "<i8";
      break;
    case kiln::ir::DType::kInt8:
      descr = "|i1";
      break;
    case kiln::ir::DType::kBool:
      descr = "|b1";
      break;
    case kiln::ir::DType::kFloat16:
      descr = "<f2";
      break;
    case kiln::ir::DType::kBFloat16:
      descr = "<V2";  // NumPy has no bfloat16: its bits (ml_dtypes reads them as such)
      break;
    case kiln::ir::DType::kFloat32:
      break;
  }
  std::string shape;
  for (int64_t d : b.shape) shape += std::to_string(d) + ", ";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t length = static_cast<uint16_t>(header.size());
  out.put(static_cast<char>(length & 0xff));
  out.put(static_cast<char>(length >> 8));
  out << header;
  out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

[[noreturn]] void usage(const std::string &why) {
  std::cerr << "kiln-cuda-measure: " << why
            << "\nusage: kiln-cuda-measure ARTIFACT.cuda.json [--device N] [--seed S] [--repeats N] [--number N] "
               "[--no-flush] [--save DIR]\n       kiln-cuda-measure --probe [--device N]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char **argv) {
  std::string artifact_path, save_dir;
  bool probe = false;
  int device = 0;
  uint64_t seed = 1;
  kiln::device::CudaTimingOptions timing;
  auto number_after = [&](int &i, const char *flag) -> long long {
    if (i + 1 >= argc) usage(std::string(flag) + " needs a value");
    try {
      size_t used = 0;
      long long v = std::stoll(argv[++i], &used);
      if (used != std::strlen(argv[i]) || v < 0) throw std::invalid_argument("");
      return v;
    } catch (const std::exception &) {
      usage(std::string(flag) + " takes a whole number >= 0, not '" + argv[i] + "'");
    }
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device") {
      device = static_cast<int>(number_after(i, "--device"));
    } else if (a == "--seed") {
      seed = static_cast<uint64_t>(number_after(i, "--seed"));
    } else if (a == "--repeats") {
      timing.repeats = static_cast<int>(std::max(1LL, number_after(i, "--repeats")));
    } else if (a == "--number") {
      timing.number = number_after(i, "--number");
    } else if (a == "--probe") {
      probe = true;
    } else if (a == "--no-flush") {
      timing.flush_l2 = false;
    } else if (a == "--save") {
      if (i + 1 >= argc) usage("--save needs a directory");
      save_dir = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage("runs a CUDA artifact on this host's GPU and prints its timing");
    } else if (!a.empty() && a[0] == '-') {
      usage("unknown flag " + a);
    } else if (artifact_path.empty()) {
      artifact_path = a;
    } else {
      usage("one artifact at a time");
    }
  }
  if (probe) {
    std::string why;
    std::unique_ptr<kiln::device::CudaDriver> driver = kiln::device::CudaDriver::open(device, &why);
    if (!driver) {
      std::cerr << "no GPU here: " << why << "\n";
      return 3;
    }
    std::cout << nlohmann::json{{"device", driver->device_name()},
                                {"arch", driver->arch()},
                                {"l2_bytes", driver->l2_bytes()}}
                     .dump()
              << "\n";
    return 0;
  }
  if (artifact_path.empty()) usage("no artifact given");
  CudaArtifact artifact;
  std::vector<std::vector<uint8_t>> inputs;
  try {
    artifact = kiln::device::read_cuda_artifact(artifact_path);
    uint64_t stream = 0;
    for (const CudaArtifactBuffer &b : artifact.buffers)
      if (b.role == "input") inputs.push_back(random_bytes(b, seed * 1000003u + stream++));
  } catch (const std::exception &e) {
    std::cerr << "kiln-cuda-measure: " << e.what() << "\n";
    return 2;
  }
  std::string why;
  std::unique_ptr<kiln::device::CudaDriver> driver = kiln::device::CudaDriver::open(device, &why);
  if (!driver) {
    std::cerr << "kiln-cuda-measure: cannot measure on a GPU here: " << why
              << "; run it on a host with an NVIDIA GPU and its driver\n";
    return 3;
  }
  try {
    kiln::device::CudaMeasurement m = driver->measure(artifact, inputs, timing);
    if (!save_dir.empty()) {
      mkdir(save_dir.c_str(), 0755);
      size_t in = 0, out = 0;
      for (const CudaArtifactBuffer &b : artifact.buffers) {
        if (b.role == "input") write_npy(save_dir + "/" + b.name + ".npy", b, inputs[in++]);
        if (b.role == "output") write_npy(save_dir + "/" + b.name + ".npy", b, m.outputs[out++]);
      }
    }
    nlohmann::json result{{"artifact", artifact.name},
                          {"artifact_arch", artifact.arch},
                          {"device", driver->device_name()},
                          {"arch", driver->arch()},
                          {"number", m.number},
                          {"median_seconds", m.median_seconds()},
                          {"loaded", m.loaded},
                          {"seconds", m.seconds}};
    std::cout << result.dump() << "\n";
  } catch (const kiln::device::CudaError &e) {
    std::cerr << "kiln-cuda-measure: " << e.what() << "\n";
    return e.fault ? 5 : 4;
  } catch (const std::exception &e) {
    std::cerr << "kiln-cuda-measure: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
