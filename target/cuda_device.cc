// Reading the CUDA device present through the driver API, without linking it: a host
// without a GPU (every build machine) has no libcuda.so.1, and Kiln must run there.
#include <dlfcn.h>

#include "target/cuda_arch.h"

namespace kiln {
namespace {

// The driver API's types and the attribute numbers Kiln reads (cuda.h, CUDA 13).
using CUresult = int;
using CUdevice = int;
constexpr int kMultiprocessorCount = 16, kL2CacheSize = 38, kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;

}  // namespace

std::optional<CudaDevice> detect_cuda_device(std::string *why) {
  auto fail = [why](const std::string &reason) -> std::optional<CudaDevice> {
    if (why) *why = reason;
    return std::nullopt;
  };
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) return fail(std::string("no CUDA driver here (") + dlerror() + ")");
  // The driver stays loaded for the process's life: CUDA does not support unloading it.
  auto symbol = [driver](const char *name) { return dlsym(driver, name); };
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(symbol("cuInit"));
  auto count = reinterpret_cast<CUresult (*)(int *)>(symbol("cuDeviceGetCount"));
  auto get = reinterpret_cast<CUresult (*)(CUdevice *, int)>(symbol("cuDeviceGet"));
  auto attribute = reinterpret_cast<CUresult (*)(int *, int, CUdevice)>(symbol("cuDeviceGetAttribute"));
  auto name = reinterpret_cast<CUresult (*)(char *, int, CUdevice)>(symbol("cuDeviceGetName"));
  if (!init || !count || !get || !attribute || !name) return fail("libcuda.so.1 lacks the driver API's entry points");
  if (CUresult r = init(0); r != 0) return fail("cuInit failed with CUDA error " + std::to_string(r));
  int devices = 0;
  if (count(&devices) != 0 || devices == 0) return fail("the CUDA driver sees no device");
  CUdevice device = 0;
  int major = 0, minor = 0, sms = 0, l2 = 0;
  char text[256] = {};
  if (get(&device, 0) != 0 || attribute(&major, kComputeCapabilityMajor, device) != 0 ||
      attribute(&minor, kComputeCapabilityMinor, device) != 0 || attribute(&sms, kMultiprocessorCount, device) != 0 ||
      attribute(&l2, kL2CacheSize, device) != 0 || name(text, sizeof text - 1, device) != 0)
    return fail("the CUDA driver could not describe device 0");
  CudaDevice d;
  d.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  d.sm_count = sms;
  d.l2_bytes = l2;
  d.name = text;
  return d;
}

}  // namespace kiln
