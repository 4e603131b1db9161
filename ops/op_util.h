// Helpers shared by the operator builders: user-error reporting, typed attribute access,
// axis normalisation and a few index-expression shorthands. Internal to ops/.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ops/registry.h"

namespace kiln::ops::detail {

using ir::DType;
using ir::Expr;
using ir::Var;

/// Throws OpError("<op>: <message>").
[[noreturn]] void fail(std::string_view op, const std::string &message);

/// "[1, 3, 7, 7]"
std::string shape_str(const std::vector<int64_t> &shape);
int64_t num_elements(const std::vector<int64_t> &shape);

// Attribute access. `attrs` are complete (complete_attrs already checked the JSON types),
// so these only read; value checks (ranges, lengths) belong to each builder.
int64_t attr_int(const json &attrs, const char *name);
double attr_float(const json &attrs, const char *name);
bool attr_bool(const json &attrs, const char *name);
std::string attr_string(const json &attrs, const char *name);
std::vector<int64_t> attr_ints(const json &attrs, const char *name);
/// Same, and checks that the list has `length` entries.
std::vector<int64_t> attr_ints(std::string_view op, const json &attrs, const char *name, size_t length);

/// Maps an ONNX-style axis in [-rank, rank) to [0, rank); `what` names the attribute.
int64_t normalize_axis(std::string_view op, int64_t axis, int64_t rank, const char *what = "axis");

void require_float(std::string_view op, const te::Tensor &t, const char *role);
void require_same_dtype(std::string_view op, const te::Tensor &a, const te::Tensor &b);
void require_rank(std::string_view op, const te::Tensor &t, size_t rank, const char *role);

/// The dtype products are accumulated in: int8 widens to int32 (as ONNX ConvInteger /
/// MatMulInteger do), bfloat16 to float32 (as every bfloat16 matrix instruction and
/// oneDNN's bf16 matmul do: a result of K products in 8 bits of mantissa would lose the
/// sum), everything else accumulates in its own type.
DType accumulate_dtype(DType input);

// Index shorthands that avoid building `x * 1` and `x + 0`, so lowered programs stay
// readable without depending on the simplifier.
Expr scaled(const Expr &x, int64_t factor);
Expr offset(const Expr &x, int64_t delta);
std::vector<Expr> to_exprs(const std::vector<Var> &vars);

/// Image layouts of 2-d operators. The spatial axes are (h, w) and the channel axis is c.
struct ImageLayout {
  bool nhwc = false;
  size_t c_axis() const { return nhwc ? 3 : 1; }
  size_t h_axis() const { return nhwc ? 1 : 2; }
  size_t w_axis() const { return nhwc ? 2 : 3; }
};
ImageLayout parse_image_layout(std::string_view op, const json &attrs);

/// Pads the spatial axes of a 4-d image by pads = [top, left, bottom, right] with
/// `pad_value`, as a separate stage named "pad" so schedules can inline it. Returns
/// `data` itself when every pad is zero.
te::Tensor pad_image(const te::Tensor &data, ImageLayout layout, const std::vector<int64_t> &pads,
                     const Expr &pad_value);

/// out = conv + bias[channel] as an element-wise stage named "bias_add" (a reduction
/// stage cannot also add, since a reduction must be the whole body).
te::Tensor add_channel_bias(std::string_view op, const te::Tensor &out, const te::Tensor &bias, size_t channel_axis);

// Operator lists of each file, concatenated by all_ops() in the documented order.
std::vector<OpDef> nn_ops();
std::vector<OpDef> winograd_ops();
std::vector<OpDef> pooling_ops();
std::vector<OpDef> unary_ops();
std::vector<OpDef> binary_ops();
std::vector<OpDef> reduction_ops();
std::vector<OpDef> normalization_ops();
std::vector<OpDef> transform_ops();

}  // namespace kiln::ops::detail
