#include "executor/gpu_steps.h"

#include <cstdlib>
#include <stdexcept>

#include "device/cuda_artifact.h"
#include "device/cuda_driver.h"
#include "executor/model.h"
#include "target/cuda_arch.h"

namespace kiln::executor {
namespace {

int device_ordinal() {
  const char *text = std::getenv("KILN_CUDA_DEVICE");
  if (!text || !*text) return 0;
  char *end = nullptr;
  long n = std::strtol(text, &end, 10);
  if (*end || n < 0 || n > 1024)
    throw ModelError(std::string("KILN_CUDA_DEVICE='") + text + "' is not a GPU number: give 0, 1, ...");
  return static_cast<int>(n);
}

}  // namespace

struct GpuSteps::Impl {
  std::unique_ptr<device::CudaDriver> driver;
  device::CudaDriver::Memory arena;
  std::vector<device::CudaDriver::Memory> weights, scratch;
  std::vector<uint64_t> address;  // per model buffer: where it lives on the GPU (0: nowhere)
  std::vector<int64_t> bytes;
  struct Step {
    std::string name;
    device::CudaDriver::Program program;
    std::vector<uint64_t> args;  // every buffer the kernels take: the step's, then its scratch
  };
  std::vector<Step> steps;
};

GpuSteps::GpuSteps(const std::string &arch, int64_t arena_bytes, const std::vector<GpuBufferSpec> &buffers,
                   const std::vector<GpuStepSpec> &steps)
    : impl_(std::make_unique<Impl>()) {
  Impl &m = *impl_;
  std::string why;
  m.driver = device::CudaDriver::open(device_ordinal(), &why);
  if (!m.driver) throw ModelError("this model was compiled for a GPU (" + arch + ") and none can run it here: " + why);
  // PTX runs on its arch and, JIT-compiled by the driver, on later ones.
  if (cuda_arch_number(m.driver->arch()) < cuda_arch_number(arch))
    throw ModelError("this model was compiled for " + arch + ", and the GPU here (" + m.driver->device_name() +
                     ") is " + m.driver->arch() +
                     ": compile it for this GPU (kiln compile --target 'cuda -arch=" + m.driver->arch() + "')");
  try {
    m.arena = m.driver->allocate(arena_bytes, "the activation arena");
    m.address.assign(buffers.size(), 0);
    m.bytes.assign(buffers.size(), 0);
    for (size_t i = 0; i < buffers.size(); ++i) {
      const GpuBufferSpec &b = buffers[i];
      m.bytes[i] = b.bytes;
      if (b.constant) {
        m.weights.push_back(m.driver->allocate(b.bytes, "a weight"));
        m.driver->copy_to_device(m.weights.back().address(), b.constant, static_cast<size_t>(b.bytes), "a weight");
        m.address[i] = m.weights.back().address();
      } else if (b.arena_offset >= 0) {
        m.address[i] = m.arena.address() + static_cast<uint64_t>(b.arena_offset);
      }
    }
    for (const GpuStepSpec &spec : steps) {
      device::CudaArtifact artifact;
      try {
        artifact = device::read_cuda_artifact(spec.artifact);
      } catch (const std::invalid_argument &e) {
        throw ModelError(std::string(e.what()) + ": compile the model again");
      }
      if (artifact.buffers.size() < spec.buffer_ids.size())
        throw ModelError(spec.artifact + " takes fewer buffers than its step has: compile the model again");
      std::vector<uint64_t> args;
      for (size_t k = 0; k < artifact.buffers.size(); ++k) {
        const device::CudaArtifactBuffer &b = artifact.buffers[k];
        if (k >= spec.buffer_ids.size()) {
          // Between the step's own kernels: allocated once, reused by every inference.
          if (b.role != "scratch")
            throw ModelError(spec.artifact + ": buffer '" + b.name + "' is no argument of its step: compile again");
          m.scratch.push_back(m.driver->allocate(b.bytes(), b.name + " of " + artifact.name));
          args.push_back(m.scratch.back().address());
          continue;
        }
        const size_t id = spec.buffer_ids[k];
        const GpuBufferSpec &want = buffers.at(id);
        // An artifact built for another subgraph would read and write past the buffers.
        if (b.shape != want.type.shape || b.dtype != want.type.dtype || m.address[id] == 0)
          throw ModelError(spec.artifact + ": its buffer " + std::to_string(k) +
                           " is not the model's buffer for this step (another shape or type); compile it again");
        args.push_back(m.address[id]);
      }
      m.steps.push_back({artifact.name, m.driver->load(artifact), std::move(args)});
    }
  } catch (const device::CudaError &e) {
    throw ModelError(std::string("loading the model onto ") + m.driver->device_name() + ": " + e.what());
  }
}

GpuSteps::~GpuSteps() = default;

const std::string &GpuSteps::device_name() const { return impl_->driver->device_name(); }

void GpuSteps::upload(size_t buffer, const void *data) {
  try {
    impl_->driver->copy_to_device(impl_->address.at(buffer), data, static_cast<size_t>(impl_->bytes.at(buffer)),
                                  "an input");
  } catch (const device::CudaError &e) {
    throw ModelError(e.what());
  }
}

void GpuSteps::download(size_t buffer, void *data) {
  try {
    impl_->driver->copy_to_host(data, impl_->address.at(buffer), static_cast<size_t>(impl_->bytes.at(buffer)),
                                "an output");
  } catch (const device::CudaError &e) {
    throw ModelError(e.what());
  }
}

void GpuSteps::run() {
  try {
    for (const Impl::Step &s : impl_->steps) impl_->driver->launch(s.program, s.args);
    impl_->driver->synchronize("running the model's steps");
  } catch (const device::CudaError &e) {
    throw ModelError(e.what());
  }
}

std::vector<double> GpuSteps::time_steps() {
  std::vector<double> ms;
  try {
    for (const Impl::Step &s : impl_->steps)
      ms.push_back(impl_->driver->time_ms([&] { impl_->driver->launch(s.program, s.args); }, "running " + s.name));
  } catch (const device::CudaError &e) {
    throw ModelError(e.what());
  }
  return ms;
}

}  // namespace kiln::executor
