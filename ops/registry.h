// The operator library: every operator Kiln can tune, as a builder of TE compute
// stages from input tensors and attributes. Semantics follow ONNX; each OpDef's
// summary documents its inputs, attributes and output.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "te/te.h"

namespace kiln::ops {

using json = nlohmann::json;

/// A user error in an operator's inputs or attributes ("conv2d: input has 3 channels but
/// weight expects 4 (groups=1)"). Messages say what was wrong and what is expected.
struct OpError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// How an operator's computation lets its neighbours fuse with it (TVM's pattern
/// kinds): the frontend's fusion decides groups from this alone.
enum class OpPattern {
  kUnspecified,    ///< never in a registered operator (a test checks); fusion treats it as opaque
  kElementwise,    ///< each output element from the same position of its inputs (with broadcast)
  kReduction,      ///< reduces or windows over its input (pools, reductions, softmax, layer norm)
  kOutputFusable,  ///< a contraction with data reuse (convolutions, matrix products) whose
                   ///< element-wise consumers fuse into its output
  kLayout,         ///< moves elements without computing (reshape, transpose, concat, slice)
  kOpaque,         ///< fuses with nothing
};

/// "elementwise", "reduction", "output_fusable", "layout", "opaque", "unspecified".
const char *to_string(OpPattern pattern);

struct OpDef {
  std::string name;     // "conv2d", "dense", "relu", ...
  std::string summary;  // one paragraph: inputs, attributes, output, ONNX correspondence
  int min_inputs = 1;
  int max_inputs = 1;  // -1 = unbounded (concat)
  json default_attrs;  // every attribute with its default value (an object)
  /// Builds the output from inputs and complete attributes (defaults already merged).
  std::function<te::Tensor(const std::vector<te::Tensor> &inputs, const json &attrs)> build;
  /// Set by all_ops() from the operator's family (registry.cc).
  OpPattern pattern = OpPattern::kUnspecified;
};

/// Every operator, in a stable documented order.
const std::vector<OpDef> &all_ops();
/// nullptr when unknown.
const OpDef *find_op(std::string_view name);

/// Merges `attrs` over the op's defaults; throws OpError for an unknown attribute name or
/// a value whose JSON type differs from the default's.
json complete_attrs(const OpDef &op, const json &attrs);

}  // namespace kiln::ops
