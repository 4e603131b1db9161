#include "device/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace kiln::device {

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

CudaDriver::Memory::Memory(Memory &&other) noexcept
    : api_(std::exchange(other.api_, nullptr)), address_(std::exchange(other.address_, 0)), bytes_(other.bytes_) {}

CudaDriver::Memory &CudaDriver::Memory::operator=(Memory &&other) noexcept {
  if (this != &other) {
    Memory gone(std::move(*this));
    api_ = std::exchange(other.api_, nullptr);
    address_ = std::exchange(other.address_, 0);
    bytes_ = other.bytes_;
  }
  return *this;
}

CudaDriver::Memory::~Memory() {
  if (api_ && address_) api_->free(address_);
}

CudaDriver::Program::Program(Program &&other) noexcept
    : api_(std::exchange(other.api_, nullptr)),
      module_(std::exchange(other.module_, nullptr)),
      name_(std::move(other.name_)),
      loaded_(std::move(other.loaded_)),
      launches_(std::move(other.launches_)),
      functions_(std::move(other.functions_)) {}

CudaDriver::Program &CudaDriver::Program::operator=(Program &&other) noexcept {
  if (this != &other) {
    Program gone(std::move(*this));
    api_ = std::exchange(other.api_, nullptr);
    module_ = std::exchange(other.module_, nullptr);
    name_ = std::move(other.name_);
    loaded_ = std::move(other.loaded_);
    launches_ = std::move(other.launches_);
    functions_ = std::move(other.functions_);
  }
  return *this;
}

CudaDriver::Program::~Program() {
  if (api_ && module_) api_->unload(module_);
}

CudaDriver::Program CudaDriver::load(const CudaArtifact &artifact) {
  const Api &api = *api_;
  Program p;
  p.api_ = &api;
  p.name_ = artifact.name;
  p.launches_ = artifact.launches;
  p.loaded_ = "ptx";
  if (!artifact.cubin.empty() && artifact.arch == arch_ &&
      api.load(&p.module_, artifact.cubin.data(), 0, nullptr, nullptr) == 0)
    p.loaded_ = "cubin";
  std::string log(8192, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSize};
  void *values[] = {log.data(), reinterpret_cast<void *>(static_cast<uintptr_t>(log.size() - 1))};
  CUresult loaded = p.loaded_ == "cubin" ? 0 : api.load(&p.module_, artifact.ptx.c_str(), 2, options, values);
  if (loaded != 0) {
    log.resize(std::strlen(log.c_str()));
    try {
      api.check(loaded, "loading the PTX of " + artifact.name);
    } catch (const CudaError &e) {
      throw CudaError(std::string(e.what()) + (log.empty() ? "" : ": " + log), e.fault);
    }
  }
  for (const CudaArtifactLaunch &l : artifact.launches) {
    Handle f = nullptr;
    api.check(api.function(&f, p.module_, l.name.c_str()), "cuModuleGetFunction(" + l.name + ")");
    if (l.shared_bytes > 48 * 1024)
      api.check(api.func_attribute(f, kFuncMaxDynamicSharedBytes, static_cast<int>(l.shared_bytes)),
                "opting " + l.name + " in to " + std::to_string(l.shared_bytes) + " bytes of shared memory");
    p.functions_.push_back(f);
  }
  return p;
}

CudaDriver::Memory CudaDriver::allocate(int64_t bytes, const std::string &what) {
  Memory m;
  CUdeviceptr p = 0;
  api_->check(api_->alloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))),
              "cuMemAlloc(" + what + ", " + std::to_string(bytes) + " bytes)");
  m.api_ = api_.get();
  m.address_ = p;
  m.bytes_ = bytes;
  return m;
}

void CudaDriver::copy_to_device(uint64_t address, const void *data, size_t bytes, const std::string &what) {
  api_->check(api_->to_device(address, data, bytes), "copying " + what + " to the GPU");
}

void CudaDriver::copy_to_host(void *data, uint64_t address, size_t bytes, const std::string &what) {
  api_->check(api_->to_host(data, address, bytes), "copying " + what + " back from the GPU");
}

void CudaDriver::launch(const Program &program, const std::vector<uint64_t> &buffers) {
  std::vector<CUdeviceptr> addresses(buffers.begin(), buffers.end());
  std::vector<void *> params;
  for (CUdeviceptr &a : addresses) params.push_back(&a);
  for (size_t i = 0; i < program.functions_.size(); ++i) {
    const CudaArtifactLaunch &l = program.launches_[i];
    api_->check(api_->launch(program.functions_[i], static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.grid[1]),
                             static_cast<unsigned>(l.grid[2]), static_cast<unsigned>(l.block[0]),
                             static_cast<unsigned>(l.block[1]), static_cast<unsigned>(l.block[2]),
                             static_cast<unsigned>(l.shared_bytes), nullptr, params.data(), nullptr),
                "launching " + l.name + " of " + program.name_);
  }
}

void CudaDriver::synchronize(const std::string &what) { api_->check(api_->synchronize(), what); }

double CudaDriver::time_ms(const std::function<void()> &enqueue, const std::string &what) {
  const Api &api = *api_;
  struct Events {
    const Api &api;
    Handle start = nullptr, stop = nullptr;
    ~Events() {
      if (start) api.event_destroy(start);
      if (stop) api.event_destroy(stop);
    }
  } e{api};
  api.check(api.event_create(&e.start, 0), "cuEventCreate");
  api.check(api.event_create(&e.stop, 0), "cuEventCreate");
  api.check(api.event_record(e.start, nullptr), "cuEventRecord");
  enqueue();
  api.check(api.event_record(e.stop, nullptr), "cuEventRecord");
  api.check(api.event_synchronize(e.stop), what);
  float ms = 0;
  api.check(api.event_elapsed(&ms, e.start, e.stop), "cuEventElapsedTime");
  return static_cast<double>(ms);
}

CudaMeasurement CudaDriver::measure(const CudaArtifact &artifact, const std::vector<std::vector<uint8_t>> &inputs,
                                    const CudaTimingOptions &timing) {
  // Everything allocated here is released on every path out (a fault ends the process
  // anyway; other errors leave the context usable).
  Program program = load(artifact);
  CudaMeasurement m;
  m.loaded = program.loaded();
  std::vector<Memory> memory;
  std::vector<uint64_t> addresses;
  size_t next_input = 0;
  int64_t total_bytes = 0;
  for (const CudaArtifactBuffer &b : artifact.buffers) {
    memory.push_back(allocate(b.bytes(), b.name));
    addresses.push_back(memory.back().address());
    total_bytes += b.bytes();
    if (b.role == "input") {
      if (next_input >= inputs.size() || inputs[next_input].size() != static_cast<size_t>(b.bytes()))
        throw std::invalid_argument("input '" + b.name + "' needs " + std::to_string(b.bytes()) + " bytes");
      copy_to_device(addresses.back(), inputs[next_input].data(), inputs[next_input].size(), b.name);
      ++next_input;
    }
  }
  if (next_input != inputs.size()) throw std::invalid_argument("more inputs than the artifact takes");
  auto timed = [&](int64_t n) {
    return time_ms(
        [&] {
          for (int64_t i = 0; i < n; ++i) launch(program, addresses);
        },
        "running " + artifact.name);
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
  Memory flush;
  bool flushing = timing.flush_l2 && l2_bytes_ > 0 && total_bytes <= l2_bytes_;
  if (flushing) flush = allocate(2 * l2_bytes_, "the L2 flush buffer");
  for (int i = 0; i < timing.repeats; ++i) {
    if (flushing)
      api_->check(api_->memset8(flush.address(), static_cast<unsigned char>(i), static_cast<size_t>(2 * l2_bytes_)),
                  "flushing L2");
    m.seconds.push_back(timed(m.number) / 1e3 / static_cast<double>(m.number));
  }
  synchronize("cuCtxSynchronize");
  for (size_t i = 0; i < artifact.buffers.size(); ++i) {
    const CudaArtifactBuffer &b = artifact.buffers[i];
    if (b.role != "output") continue;
    std::vector<uint8_t> bytes(static_cast<size_t>(b.bytes()));
    copy_to_host(bytes.data(), addresses[i], bytes.size(), b.name);
    m.outputs.push_back(std::move(bytes));
  }
  return m;
}

}  // namespace kiln::device
