// Trace JSON (kiln show --trace, records read back from a database): any bytes are
// refused with a clear error or give a schedule; a schedule they give must compute
// what the unscheduled program computes (the interpreter is the oracle).
#include <nlohmann/json.hpp>

#include <random>
#include <stdexcept>

#include "ir/host_tensor.h"
#include "ir/interpreter.h"
#include "ir/schedule/analysis.h"
#include "ir/schedule/schedule.h"
#include "ops/workload.h"
#include "te/te.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace kiln;

ir::TensorType f32(std::vector<int64_t> shape) { return ir::TensorType{std::move(shape), ir::DType::kFloat32}; }

// Small programs with the block and loop names real traces use.
const std::vector<ir::PrimFunc> &programs() {
  static const std::vector<ir::PrimFunc> funcs = [] {
    std::vector<ir::PrimFunc> f;
    f.push_back(te::lower(ops::Workload::single("dense", {f32({8, 12}), f32({16, 12}), f32({16})}).build_dag()));
    f.push_back(te::lower(
        ops::Workload::single("conv2d", {f32({1, 4, 6, 6}), f32({8, 4, 3, 3}), f32({8})}, {{"pads", {1, 1, 1, 1}}})
            .build_dag()));
    return f;
  }();
  return funcs;
}

}  // namespace

KILN_FUZZ_TARGET(trace_json) {
  ir::Trace trace;
  try {
    trace = ir::Trace::from_json(nlohmann::json::parse(input));
  } catch (const nlohmann::json::exception &) {
    return;
  } catch (const std::invalid_argument &) {
    return;
  }
  for (const ir::PrimFunc &func : programs()) {
    ir::PrimFunc scheduled;
    try {
      scheduled = ir::Schedule::replay(func, trace).func();
    } catch (const ir::ScheduleError &) {
      continue;
    } catch (const std::invalid_argument &) {
      continue;
    }
    std::mt19937_64 rng(1);
    std::vector<ir::HostTensor> inputs;
    for (size_t i = 0; i + 1 < func.params.size(); ++i) {
      inputs.push_back(ir::HostTensor::like(func.params[i]));
      inputs.back().fill_random(rng);
    }
    double error = ir::relative_l2_error(ir::interpret(scheduled, inputs)[0], ir::interpret(func, inputs)[0]);
    if (!(error <= 1e-4)) throw std::logic_error("a replayed trace changed the program's result");
  }
}
