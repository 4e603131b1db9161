#include "frontend/passes.h"
#include "frontend/passes/pass_util.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace kiln::frontend {

using namespace detail;

int fold_channel_affine(Graph &graph) {
  int folded = 0;
  for (bool changed = true; changed;) {
    changed = false;
    Uses u(graph);
    for (size_t i = 0; i < graph.nodes.size() && !changed; ++i) {
      const Node &n = graph.nodes[i];
      bool scales = n.op == "mul" || n.op == "div", shifts = n.op == "add" || n.op == "sub";
      if (n.inputs.size() != 2 || (!scales && !shifts)) continue;
      // The product is the first operand, or the second of a commutative operation.
      for (size_t side = 0; side < 2 && !changed; ++side) {
        if (side == 1 && (n.op == "div" || n.op == "sub")) break;
        ValueId product = n.inputs[side];
        std::optional<size_t> p = graph.producer(product);
        if (!p || !u.single_use(product)) continue;
        const Node &producer = graph.nodes[*p];
        std::optional<ChannelLayout> layout = channel_layout(graph, producer);
        // Copies: adding values below may move graph.values.
        const Value result = graph.values[static_cast<size_t>(product)];
        if (!layout || result.type.dtype != ir::DType::kFloat32 ||
            graph.values[static_cast<size_t>(n.output)].type.shape != result.type.shape)
          continue;
        std::optional<std::vector<double>> c = per_channel_values(graph.values[static_cast<size_t>(n.inputs[1 - side])],
                                                                  result.type.shape, layout->output_axis);
        const Value weight = graph.values[static_cast<size_t>(producer.inputs[1])];
        bool has_bias = producer.inputs.size() == 3;
        std::optional<Value> bias;
        if (has_bias) bias = graph.values[static_cast<size_t>(producer.inputs[2])];
        if (!c || !weight.is_constant() || (bias && !bias->is_constant())) continue;

        std::vector<double> scale(c->size(), 1.0), shift(c->size(), 0.0);
        for (size_t k = 0; k < c->size(); ++k) {
          double v = (*c)[k];
          if (n.op == "mul") scale[k] = v;
          if (n.op == "div") scale[k] = 1.0 / v;
          if (n.op == "add") shift[k] = v;
          if (n.op == "sub") shift[k] = -v;
        }
        Node rewritten = producer;
        if (scales) {
          ir::HostTensor w = *weight.constant;
          int64_t per_channel = w.size() / layout->channels;
          for (int64_t e = 0; e < w.size(); ++e) {
            int64_t k = layout->weight_channel_last ? e % layout->channels : e / per_channel;
            w.set(e, w.get(e) * scale[static_cast<size_t>(k)]);
          }
          Value scaled = weight;
          scaled.name += "_folded";
          scaled.constant = std::make_shared<const ir::HostTensor>(std::move(w));
          rewritten.inputs[1] = graph.add_value(std::move(scaled));
        }
        if (has_bias || shifts) {
          ir::HostTensor b(ir::DType::kFloat32, {layout->channels});
          for (int64_t k = 0; k < layout->channels; ++k) {
            double old = bias ? bias->constant->get(bias->constant->size() == 1 ? 0 : k) : 0.0;
            b.set(k, old * scale[static_cast<size_t>(k)] + shift[static_cast<size_t>(k)]);
          }
          ValueId new_bias = graph.add_value(Value{result.name + "_bias",
                                                   {{layout->channels}, ir::DType::kFloat32},
                                                   std::make_shared<const ir::HostTensor>(std::move(b))});
          if (has_bias)
            rewritten.inputs[2] = new_bias;
          else
            rewritten.inputs.push_back(new_bias);
        }
        // The producer computes the folded result in the operation's place.
        rewritten.output = graph.nodes[i].output;
        graph.nodes[i] = std::move(rewritten);
        graph.nodes.erase(graph.nodes.begin() + static_cast<long>(*p));
        ++folded;
        changed = true;
      }
    }
  }
  return folded;
}

}  // namespace kiln::frontend
