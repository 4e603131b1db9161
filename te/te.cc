#include "te/te.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/functor.h"

namespace kiln::te {

using namespace ir;  // NOLINT: this file implements the IR-facing layer of TE

// Tensors read while `compute` evaluates its lambda; collected so each stage knows its
// inputs without a separate registry.
static thread_local std::vector<Tensor> *g_accessed = nullptr;

Expr Tensor::operator()(std::vector<Expr> indices) const {
  if (g_accessed) g_accessed->push_back(*this);
  return make_load(node_->buffer, std::move(indices));
}
const std::vector<int64_t> &Tensor::shape() const { return node_->buffer->shape; }
DType Tensor::dtype() const { return node_->buffer->dtype; }
const std::string &Tensor::name() const { return node_->name; }

Tensor placeholder(std::vector<int64_t> shape, DType dtype, std::string name) {
  auto n = std::make_shared<TensorNode>();
  n->buffer = make_buffer(name, dtype, std::move(shape));
  n->name = std::move(name);
  return Tensor(std::move(n));
}

Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var> &)> &fn, std::string name) {
  static const char *kAxisNames[] = {"i", "j", "k", "l", "m", "n", "o", "p"};
  std::vector<Var> vars;
  std::vector<IterVar> axes;
  for (size_t d = 0; d < shape.size(); ++d) {
    Var v(d < 8 ? kAxisNames[d] : "ax" + std::to_string(d));
    vars.push_back(v);
    axes.push_back(IterVar{v, shape[d], IterKind::kSpatial});
  }
  std::vector<Tensor> accessed;
  std::vector<Tensor> *saved = g_accessed;
  g_accessed = &accessed;
  Expr body;
  try {
    body = fn(vars);
  } catch (...) {
    g_accessed = saved;
    throw;
  }
  g_accessed = saved;
  if (const auto *red = body.as<ReduceNode>()) {
    for_each_subexpr(red->source, [&](const Expr &e) {
      if (e.as<ReduceNode>()) throw IRError("compute '" + name + "' nests a reduction inside a reduction");
    });
  } else {
    for_each_subexpr(body, [&](const Expr &e) {
      if (e.as<ReduceNode>()) throw IRError("compute '" + name + "': a reduction must be the whole body");
    });
  }
  auto n = std::make_shared<TensorNode>();
  n->buffer = make_buffer(name, body.dtype(), std::move(shape));
  n->name = std::move(name);
  n->is_placeholder = false;
  n->axes = std::move(axes);
  n->body = std::move(body);
  for (const Tensor &t : accessed) {
    bool seen = false;
    for (const Tensor &u : n->inputs) seen = seen || u.same_as(t);
    if (!seen) n->inputs.push_back(t);
  }
  return Tensor(std::move(n));
}

IterVar reduce_axis(int64_t extent, std::string name) {
  return IterVar{Var(std::move(name)), extent, IterKind::kReduce};
}
Expr sum(Expr source, std::vector<IterVar> axes) {
  return make_reduce(Combiner::kSum, std::move(source), std::move(axes));
}
Expr max_of(Expr source, std::vector<IterVar> axes) {
  return make_reduce(Combiner::kMax, std::move(source), std::move(axes));
}

ComputeDAG make_dag(std::vector<Tensor> inputs, std::vector<Tensor> outputs) {
  ComputeDAG dag;
  std::unordered_set<const TensorNode *> is_input, visited;
  for (const Tensor &t : inputs) is_input.insert(t.get());
  std::function<void(const Tensor &)> visit = [&](const Tensor &t) {
    if (visited.count(t.get())) return;
    visited.insert(t.get());
    if (t->is_placeholder) {
      if (!is_input.count(t.get()))
        throw IRError("placeholder '" + t.name() + "' is read but not listed as an input of the DAG");
      return;
    }
    for (const Tensor &in : t->inputs) visit(in);
    dag.stages.push_back(t);
  };
  for (const Tensor &t : outputs) visit(t);
  dag.inputs = std::move(inputs);
  dag.outputs = std::move(outputs);
  return dag;
}

static Stmt lower_stage(const Tensor &t, const std::string &block_name) {
  const TensorNode &n = *t.get();
  VarMap to_block_var;
  std::vector<IterVar> iter_vars;
  std::vector<Expr> iter_values;
  std::vector<Var> loop_vars;
  std::vector<int64_t> loop_extents;
  std::vector<Expr> out_indices;
  auto add_axis = [&](const IterVar &axis) {
    Var block_var("v" + axis.var.name());
    Var loop_var(axis.var.name());
    to_block_var[axis.var.get()] = block_var;
    iter_vars.push_back(IterVar{block_var, axis.extent, axis.kind});
    iter_values.push_back(loop_var);
    loop_vars.push_back(loop_var);
    loop_extents.push_back(axis.extent);
    return block_var;
  };
  for (const IterVar &axis : n.axes) out_indices.push_back(add_axis(axis));

  Stmt init, body;
  if (const auto *red = n.body.as<ReduceNode>()) {
    for (const IterVar &axis : red->axes) add_axis(axis);
    Expr source = substitute(red->source, to_block_var);
    init = make_store(n.buffer, out_indices, combiner_identity(red->combiner, n.buffer->dtype));
    body = make_store(n.buffer, out_indices, combine(red->combiner, make_load(n.buffer, out_indices), source));
  } else {
    body = make_store(n.buffer, out_indices, substitute(n.body, to_block_var));
  }
  Stmt s = make_block(block_name, iter_vars, iter_values, Expr(), init, body);
  for (size_t i = loop_vars.size(); i-- > 0;) s = make_for(loop_vars[i], loop_extents[i], ForKind::kSerial, s);
  return s;
}

PrimFunc lower(const ComputeDAG &dag, const std::string &name) {
  PrimFunc f;
  f.name = name;
  f.constant_params = dag.constant_inputs;  // inputs come first among the parameters
  std::unordered_set<const TensorNode *> is_output;
  for (const Tensor &t : dag.inputs) f.params.push_back(t->buffer);
  for (const Tensor &t : dag.outputs) {
    f.params.push_back(t->buffer);
    is_output.insert(t.get());
  }
  std::vector<Stmt> nests;
  std::vector<Buffer> intermediates;
  std::unordered_set<std::string> block_names{"root"};
  for (const Tensor &t : dag.stages) {
    // Block names identify blocks in schedules and traces, so they must be unique.
    std::string block_name = t.name();
    for (int suffix = 1; block_names.count(block_name); ++suffix) block_name = t.name() + "_" + std::to_string(suffix);
    block_names.insert(block_name);
    nests.push_back(lower_stage(t, block_name));
    if (!is_output.count(t.get())) intermediates.push_back(t->buffer);
  }
  f.body = make_block("root", {}, {}, Expr(), Stmt(), make_seq(std::move(nests)), std::move(intermediates));
  return f;
}

}  // namespace kiln::te
