#include "measure/host_runner.h"

namespace kiln::measure {

std::unique_ptr<Runner> make_host_runner(const Target &target, const HostRunnerOptions &options,
                                         std::string *device_name) {
  switch (target.backend().kind()) {
    case BackendKind::kCuda: {
      auto runner = std::make_unique<CudaRunner>(options.cuda);
      if (std::string why = runner->why_not(target, device_name); !why.empty()) throw HostCannotMeasure(target, why);
      return runner;
    }
    case BackendKind::kX86Cpu:
    case BackendKind::kAArch64Cpu:
    case BackendKind::kOtherCpu: {
      std::string why = target.backend().why_this_host_cannot_run(target);
      if (!why.empty() && !options.cpu_server_wrapped) throw HostCannotMeasure(target, why);
      return std::make_unique<LocalRunner>(options.cpu);
    }
  }
  throw HostCannotMeasure(target, "Kiln has no runner for its backend");
}

}  // namespace kiln::measure
