// Tensor compute definitions (TE): placeholders and `compute(shape, fn)` with reduce
// axes, forming small DAGs that lower to loop programs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/stmt.h"

namespace kiln::te {

using ir::DType;
using ir::Expr;
using ir::IterVar;
using ir::Var;

struct TensorNode;

/// A tensor produced by a placeholder or a compute stage. Calling it with indices
/// yields a load of its buffer.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const TensorNode> node) : node_(std::move(node)) {}
  const TensorNode *get() const { return node_.get(); }
  const TensorNode *operator->() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }
  bool same_as(const Tensor &o) const { return node_ == o.node_; }

  Expr operator()(std::vector<Expr> indices) const;
  template <typename... Args>
  Expr operator()(Args... indices) const {
    return (*this)(std::vector<Expr>{Expr(indices)...});
  }
  const std::vector<int64_t> &shape() const;
  DType dtype() const;
  const std::string &name() const;
  size_t ndim() const { return shape().size(); }

 private:
  std::shared_ptr<const TensorNode> node_;
};

struct TensorNode {
  std::string name;
  ir::Buffer buffer;
  bool is_placeholder = true;
  // Compute stages only:
  std::vector<IterVar> axes;   // spatial axes, one per output dimension
  Expr body;                   // a plain expression or a Reduce at the top
  std::vector<Tensor> inputs;  // tensors loaded by `body`, in first-use order
};

Tensor placeholder(std::vector<int64_t> shape, DType dtype, std::string name);
/// `fn` receives one index variable per output dimension.
Tensor compute(std::vector<int64_t> shape, const std::function<Expr(const std::vector<Var> &)> &fn, std::string name);
IterVar reduce_axis(int64_t extent, std::string name);
Expr sum(Expr source, std::vector<IterVar> axes);
Expr max_of(Expr source, std::vector<IterVar> axes);

/// A DAG of compute stages between explicit inputs and outputs.
struct ComputeDAG {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<Tensor> stages;           // every compute stage, producers before consumers
  std::vector<size_t> constant_inputs;  // indices into `inputs` whose data is fixed at compile time
};

/// Collects the stages between inputs and outputs; throws ir::IRError if a stage reads
/// a placeholder that is not among `inputs`.
ComputeDAG make_dag(std::vector<Tensor> inputs, std::vector<Tensor> outputs);

/// Lowers to a loop program: one loop nest + block per stage, parameters = inputs then
/// outputs, intermediates allocated in the root block.
ir::PrimFunc lower(const ComputeDAG &dag, const std::string &name = "main");

}  // namespace kiln::te
