#include "measure/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

namespace kiln::measure {

namespace {

// The driver API's types and constants Kiln uses (cuda.h, CUDA 12 and 13).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using Handle = void *;
constexpr int kL2CacheSize = 38, kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;
constexpr int kFuncMaxDynamicSharedBytes = 8;
constexpr int kJitErrorLogBuffer = 5, kJitErrorLogBufferSize = 6;
// Errors after which the context is lost (cuda.h: ILLEGAL_ADDRESS 700 ... LAUNCH_FAILED 719).
bool is_fault(CUresult r) { return r >= 700 && r <= 719; }

}  // namespace

struct CudaDriver::Api {
  void *library = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get)(CUdevice *, int) = nullptr;
  CUresult (*device_count)(int *) = nullptr;
  CUresult (*attribute)(int *, int, CUdevice) = nullptr;
  CUresult (*name)(char *, int, CUdevice) = nullptr;
  CUresult (*retain)(Handle *, CUdevice) = nullptr;
  CUresult (*release)(CUdevice) = nullptr;
  CUresult (*set_current)(Handle) = nullptr;
  CUresult (*load)(Handle *, const void *, unsigned, int *, void **) = nullptr;
  CUresult (*unload)(Handle) = nullptr;
  CUresult (*function)(Handle *, Handle, const char *) = nullptr;
  CUresult (*func_attribute)(Handle, int, int) = nullptr;
  CUresult (*alloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*free)(CUdeviceptr) = nullptr;
  CUresult (*to_device)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*to_host)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*memset8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*launch)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle, void **,
                     void **) = nullptr;
  CUresult (*event_create)(Handle *, unsigned) = nullptr;
  CUresult (*event_destroy)(Handle) = nullptr;
  CUresult (*event_record)(Handle, Handle) = nullptr;
  CUresult (*event_synchronize)(Handle) = nullptr;
  CUresult (*event_elapsed)(float *, Handle, Handle) = nullptr;
  CUresult (*synchronize)() = nullptr;
  CUresult (*error_name)(CUresult, const char **) = nullptr;

  void check(CUresult r, const std::string &call) const {
    if (r == 0) return;
    const char *text = nullptr;
    std::string name = error_name && error_name(r, &text) == 0 && text ? text : "error " + std::to_string(r);
    throw CudaError(call + " failed: " + name, is_fault(r));
  }
};

std::unique_ptr<CudaDriver> CudaDriver::open(int ordinal, std::string *why) {
  auto fail = [why](const std::string &reason) -> std::unique_ptr<CudaDriver> {
    if (why) *why = reason;
    return nullptr;
  };
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) return fail(std::string("no CUDA driver here (") + dlerror() + ")");
  auto api = std::make_unique<Api>();
  api->library = library;
  bool complete = true;
  auto bind = [&](auto &fn, std::initializer_list<const char *> names) {
    for (const char *n : names) {
      if (void *p = dlsym(library, n)) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        return;
      }
    }
    complete = false;
  };
  bind(api->init, {"cuInit"});
  bind(api->device_get, {"cuDeviceGet"});
  bind(api->device_count, {"cuDeviceGetCount"});
  bind(api->attribute, {"cuDeviceGetAttribute"});
  bind(api->name, {"cuDeviceGetName"});
  bind(api->retain, {"cuDevicePrimaryCtxRetain"});
  bind(api->release, {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"});
  bind(api->set_current, {"cuCtxSetCurrent"});
  bind(api->load, {"cuModuleLoadDataEx"});
  bind(api->unload, {"cuModuleUnload"});
  bind(api->function, {"cuModuleGetFunction"});
  bind(api->func_attribute, {"cuFuncSetAttribute"});
  bind(api->alloc, {"cuMemAlloc_v2"});
  bind(api->free, {"cuMemFree_v2"});
  bind(api->to_device, {"cuMemcpyHtoD_v2"});
  bind(api->to_host, {"cuMemcpyDtoH_v2"});
  bind(api->memset8, {"cuMemsetD8_v2"});
  bind(api->launch, {"cuLaunchKernel"});
  bind(api->event_create, {"cuEventCreate"});
  bind(api->event_destroy, {"cuEventDestroy_v2", "cuEventDestroy"});
  bind(api->event_record, {"cuEventRecord"});
  bind(api->event_synchronize, {"cuEventSynchronize"});
  bind(api->event_elapsed, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
  bind(api->synchronize, {"cuCtxSynchronize"});
  bind(api->error_name, {"cuGetErrorName"});
  if (!complete) return fail("libcuda.so.1 lacks driver API entry points Kiln needs (a driver older than CUDA 12?)");
  if (CUresult r = api->init(0); r != 0) return fail("cuInit failed with CUDA error " + std::to_string(r));
  int count = 0;
  if (api->device_count(&count) != 0 || count <= ordinal)
    return fail("the CUDA driver sees " + std::to_string(count) + " device(s), not device " + std::to_string(ordinal));
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  try {
    api->check(api->device_get(&d->device_, ordinal), "cuDeviceGet");
    int major = 0, minor = 0, l2 = 0;
    char name[256] = {};
    api->check(api->attribute(&major, kComputeCapabilityMajor, d->device_), "cuDeviceGetAttribute");
    api->check(api->attribute(&minor, kComputeCapabilityMinor, d->device_), "cuDeviceGetAttribute");
    api->check(api->attribute(&l2, kL2CacheSize, d->device_), "cuDeviceGetAttribute");
    api->check(api->name(name, sizeof name - 1, d->device_), "cuDeviceGetName");
    d->arch_ = "sm_" + std::to_string(major) + std::to_string(minor);
    d->l2_bytes_ = l2;
    d->device_name_ = name;
    api->check(api->retain(&d->context_, d->device_), "cuDevicePrimaryCtxRetain");
    api->check(api->set_current(d->context_), "cuCtxSetCurrent");
  } catch (const CudaError &e) {
    return fail(e.what());
  }
  d->api_ = std::move(api);
  return d;
}

CudaDriver::~CudaDriver() {
  // The library stays loaded: CUDA does not support unloading its driver.
  if (api_ && context_) api_->release(device_);
}

double CudaMeasurement::median_seconds() const {
  if (seconds.empty()) return 0;
  std::vector<double> s = seconds;
  std::sort(s.begin(), s.end());
  return s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
}

CudaMeasurement CudaDriver::measure(const CudaArtifact &artifact, const std::vector<std::vector<uint8_t>> &inputs,
                                    const CudaTimingOptions &timing) {
  const Api &api = *api_;
  // Everything allocated here is released on every path out (a fault ends the process
  // anyway; other errors leave the context usable).
  struct Resources {
    explicit Resources(const Api &api) : api(api) {}
    Resources(const Resources &) = delete;
    Resources &operator=(const Resources &) = delete;
    const Api &api;
    Handle module = nullptr;
    std::vector<CUdeviceptr> memory;
    std::vector<Handle> events;
    ~Resources() {
      for (Handle e : events) api.event_destroy(e);
      for (CUdeviceptr p : memory) api.free(p);
      if (module) api.unload(module);
    }
  } r(api);
  // The cubin where it is for this very arch and the driver takes it (a driver older
  // than the toolkit that made it refuses it); the PTX, JIT-compiled, otherwise.
  CudaMeasurement m;
  m.loaded = "ptx";
  if (!artifact.cubin.empty() && artifact.arch == arch_ &&
      api.load(&r.module, artifact.cubin.data(), 0, nullptr, nullptr) == 0)
    m.loaded = "cubin";
  std::string log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size() - 1))};
  CUresult loaded = m.loaded == "cubin" ? 0 : api.load(&r.module, artifact.ptx.c_str(), 2, options, values);
  if (loaded != 0) {
    log.resize(std::strlen(log.c_str()));
    try {
      api.check(loaded, "loading the PTX of " + artifact.name);
    } catch (const CudaError &e) {
      throw CudaError(std::string(e.what()) + (log.empty() ? "" : ": " + log), e.fault);
    }
  }
  std::vector<Handle> functions;
  for (const CudaArtifactLaunch &l : artifact.launches) {
    Handle f = nullptr;
    api.check(api.function(&f, r.module, l.name.c_str()), "cuModuleGetFunction(" + l.name + ")");
    if (l.shared_bytes > 48 * 1024)
      api.check(api.func_attribute(f, kFuncMaxDynamicSharedBytes, static_cast<int>(l.shared_bytes)),
                "opting " + l.name + " in to " + std::to_string(l.shared_bytes) + " bytes of shared memory");
    functions.push_back(f);
  }
  size_t next_input = 0;
  int64_t total_bytes = 0;
  std::vector<void *> params;
  for (const CudaArtifactBuffer &b : artifact.buffers) {
    CUdeviceptr p = 0;
    api.check(api.alloc(&p, static_cast<size_t>(b.bytes())), "cuMemAlloc(" + b.name + ")");
    r.memory.push_back(p);
    total_bytes += b.bytes();
    if (b.role == "input") {
      if (next_input >= inputs.size() || inputs[next_input].size() != static_cast<size_t>(b.bytes()))
        throw std::invalid_argument("input '" + b.name + "' needs " + std::to_string(b.bytes()) + " bytes");
      api.check(api.to_device(p, inputs[next_input].data(), inputs[next_input].size()), "copying " + b.name);
      ++next_input;
    }
  }
  if (next_input != inputs.size()) throw std::invalid_argument("more inputs than the artifact takes");
  for (CUdeviceptr &p : r.memory) params.push_back(&p);
  auto run_once = [&] {
    for (size_t i = 0; i < functions.size(); ++i) {
      const CudaArtifactLaunch &l = artifact.launches[i];
      api.check(api.launch(functions[i], static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.grid[1]),
                           static_cast<unsigned>(l.grid[2]), static_cast<unsigned>(l.block[0]),
                           static_cast<unsigned>(l.block[1]), static_cast<unsigned>(l.block[2]),
                           static_cast<unsigned>(l.shared_bytes), nullptr, params.data(), nullptr),
                "launching " + l.name);
    }
  };
  Handle start = nullptr, stop = nullptr;
  api.check(api.event_create(&start, 0), "cuEventCreate");
  r.events.push_back(start);
  api.check(api.event_create(&stop, 0), "cuEventCreate");
  r.events.push_back(stop);
  auto timed = [&](int64_t n) {
    api.check(api.event_record(start, nullptr), "cuEventRecord");
    for (int64_t i = 0; i < n; ++i) run_once();
    api.check(api.event_record(stop, nullptr), "cuEventRecord");
    api.check(api.event_synchronize(stop), "running " + artifact.name);
    float ms = 0;
    api.check(api.event_elapsed(&ms, start, stop), "cuEventElapsedTime");
    return static_cast<double>(ms);
  };
  // Warm-up (module JIT, caches, clocks), which also gives the outputs.
  double first_ms = timed(1);
  m.number = timing.number;
  if (m.number <= 0) {
    m.number = 1;
    for (double ms = first_ms; ms < timing.min_repeat_ms && m.number < 1'000'000;) {
      m.number = std::min<int64_t>(
          1'000'000, m.number * std::max<int64_t>(2, static_cast<int64_t>(timing.min_repeat_ms / std::max(ms, 1e-3))));
      ms = timed(m.number);
    }
  }
  CUdeviceptr flush = 0;
  bool flushing = timing.flush_l2 && l2_bytes_ > 0 && total_bytes <= l2_bytes_;
  if (flushing) {
    api.check(api.alloc(&flush, static_cast<size_t>(2 * l2_bytes_)), "allocating the L2 flush buffer");
    r.memory.push_back(flush);
  }
  for (int i = 0; i < timing.repeats; ++i) {
    if (flushing) api.check(api.memset8(flush, static_cast<unsigned char>(i), 2 * l2_bytes_), "flushing L2");
    m.seconds.push_back(timed(m.number) / 1e3 / static_cast<double>(m.number));
  }
  api.check(api.synchronize(), "cuCtxSynchronize");
  for (size_t i = 0; i < artifact.buffers.size(); ++i) {
    const CudaArtifactBuffer &b = artifact.buffers[i];
    if (b.role != "output") continue;
    std::vector<uint8_t> bytes(static_cast<size_t>(b.bytes()));
    api.check(api.to_host(bytes.data(), r.memory[i], bytes.size()), "copying " + b.name + " back");
    m.outputs.push_back(std::move(bytes));
  }
  return m;
}

}  // namespace kiln::measure
