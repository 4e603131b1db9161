#include "frontend/reference.h"

#include <stdexcept>

#include "frontend/tasks.h"
#include "ir/interpreter.h"

namespace kiln::frontend {

std::vector<ir::HostTensor> evaluate_reference(const Graph &graph, const std::vector<ir::HostTensor> &inputs) {
  if (inputs.size() != graph.inputs.size())
    throw std::invalid_argument("the graph has " + std::to_string(graph.inputs.size()) + " inputs, " +
                                std::to_string(inputs.size()) + " given");
  std::vector<const ir::HostTensor *> env(graph.values.size(), nullptr);
  for (size_t v = 0; v < graph.values.size(); ++v) env[v] = graph.values[v].constant.get();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value &v = graph.values[static_cast<size_t>(graph.inputs[i])];
    if (inputs[i].shape() != v.type.shape || inputs[i].dtype() != v.type.dtype)
      throw std::invalid_argument("input '" + v.name + "' must be " + shape_string(v.type.shape) + " " +
                                  ir::dtype_name(v.type.dtype) + ", got " + shape_string(inputs[i].shape()) + " " +
                                  ir::dtype_name(inputs[i].dtype()));
    env[static_cast<size_t>(graph.inputs[i])] = &inputs[i];
  }
  std::vector<ir::HostTensor> results(graph.values.size());
  for (const Node &n : graph.nodes) {
    std::vector<ir::HostTensor> args;
    for (ValueId in : n.inputs) args.push_back(*env[static_cast<size_t>(in)]);
    ir::PrimFunc func = te::lower(node_workload(graph, n).build_dag(), n.op);
    results[static_cast<size_t>(n.output)] = std::move(ir::interpret(func, args).at(0));
    env[static_cast<size_t>(n.output)] = &results[static_cast<size_t>(n.output)];
  }
  std::vector<ir::HostTensor> outputs;
  for (ValueId v : graph.outputs) outputs.push_back(*env[static_cast<size_t>(v)]);
  return outputs;
}

}  // namespace kiln::frontend
