#include "frontend/reference.h"

#include <stdexcept>

#include "frontend/tasks.h"
#include "ir/interpreter.h"

namespace kiln::frontend {

namespace {

// Values by id: constants point at their data, inputs at the caller's tensors, results
// at `results`.
std::vector<const ir::HostTensor *> bind_inputs(const Graph &graph, const std::vector<ir::HostTensor> &inputs) {
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
  return env;
}

ir::HostTensor run(const ops::Workload &w, const std::vector<ValueId> &inputs,
                   const std::vector<const ir::HostTensor *> &env, const std::string &name) {
  std::vector<ir::HostTensor> args;
  for (ValueId in : inputs) args.push_back(*env[static_cast<size_t>(in)]);
  return std::move(ir::interpret(te::lower(w.build_dag(), name), args).at(0));
}

std::vector<ir::HostTensor> outputs_of(const Graph &graph, const std::vector<const ir::HostTensor *> &env) {
  std::vector<ir::HostTensor> outputs;
  for (ValueId v : graph.outputs) outputs.push_back(*env[static_cast<size_t>(v)]);
  return outputs;
}

}  // namespace

std::vector<ir::HostTensor> evaluate_reference(const Graph &graph, const std::vector<ir::HostTensor> &inputs) {
  std::vector<const ir::HostTensor *> env = bind_inputs(graph, inputs);
  std::vector<ir::HostTensor> results(graph.values.size());
  for (const Node &n : graph.nodes) {
    results[static_cast<size_t>(n.output)] = run(node_workload(graph, n), n.inputs, env, n.op);
    env[static_cast<size_t>(n.output)] = &results[static_cast<size_t>(n.output)];
  }
  return outputs_of(graph, env);
}

std::vector<ir::HostTensor> evaluate_subgraphs(const Graph &graph, const std::vector<Subgraph> &subgraphs,
                                               const std::vector<ir::HostTensor> &inputs) {
  std::vector<const ir::HostTensor *> env = bind_inputs(graph, inputs);
  std::vector<ir::HostTensor> results(graph.values.size());
  for (const Subgraph &s : subgraphs) {
    results[static_cast<size_t>(s.output)] = run(s.workload, s.inputs, env, "subgraph");
    env[static_cast<size_t>(s.output)] = &results[static_cast<size_t>(s.output)];
  }
  return outputs_of(graph, env);
}

}  // namespace kiln::frontend
