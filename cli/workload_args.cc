#include "cli/workload_args.h"

#include "support/file_read.h"
#include "support/flag_checks.h"
#include "support/json_read.h"

#include <CLI/CLI.hpp>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kiln::cli {

void WorkloadArgs::add_to(CLI::App &cmd) {
  cmd.add_option("--op", op, "operator name (see `kiln ops`)");
  cmd.add_option("--shape", shapes, "input shape, e.g. 1x64x56x56; repeat once per input in order")->take_all();
  cmd.add_option("--dtype", dtype, "element type of every input")->capture_default_str();
  cmd.add_option("--attrs", attrs, "operator attributes as a JSON object, e.g. '{\"strides\":[2,2]}'")
      ->capture_default_str();
  cmd.add_option("--workload", workload_file, "a workload JSON file (the documented key format) instead of --op");
  cmd.add_option("--constant", constant_inputs,
                 "index of an input whose data is fixed at compile time (a weight, e.g. 1 for dense or conv2d): "
                 "programs may read it packed once, ahead of time; repeat for several");
}

ops::Workload WorkloadArgs::build() const {
  if (!workload_file.empty()) {
    if (!op.empty()) throw std::invalid_argument("give either --op or --workload, not both");
    if (!constant_inputs.empty())
      throw std::invalid_argument("--constant goes with --op; a workload file marks its inputs \"constant\": true");
    return ops::Workload::from_json(kiln::support::read_json_file(workload_file, "workload file"));
  }
  if (op.empty()) throw std::invalid_argument("missing --op NAME (or --workload FILE); `kiln ops` lists operators");
  if (shapes.empty()) throw std::invalid_argument("missing --shape: give one --shape per input of '" + op + "'");
  std::vector<ir::TensorType> inputs;
  ir::DType t = ir::parse_dtype(dtype);
  for (const std::string &s : shapes) inputs.push_back(ir::TensorType{ops::parse_shape(s), t});
  nlohmann::json a;
  try {
    a = kiln::support::parse_json(attrs);
  } catch (const nlohmann::json::exception &e) {
    throw std::invalid_argument("--attrs is not valid JSON: " + std::string(e.what()));
  }
  ops::Workload w = ops::Workload::single(op, std::move(inputs), a);
  for (size_t i : constant_inputs) {
    if (i >= w.inputs.size())
      throw std::invalid_argument("--constant " + std::to_string(i) + ": '" + op + "' was given " +
                                  std::to_string(w.inputs.size()) + " inputs (0 to " +
                                  std::to_string(w.inputs.size() - 1) + ")");
    w.inputs[i].constant = true;
  }
  w.build_dag();  // validates shapes and attributes now, with the operator's message
  return w;
}

void fail(const std::string &message) {
  // Called from a handler of std::exception while an earlier fail's error is in flight
  // (a fail inside a try): that one was reported already; "Runtime error" would follow.
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const CLI::RuntimeError &) {
      throw;
    } catch (...) {
    }
  }
  std::cerr << "kiln: error: " << support::printable(message) << "\n";
  throw CLI::RuntimeError(1);
}

}  // namespace kiln::cli
