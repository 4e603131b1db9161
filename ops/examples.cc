#include "ops/examples.h"

#include <nlohmann/json.hpp>

namespace kiln::ops {
namespace {

using ir::DType;
using ir::TensorType;
using ops::OpCall;
using ops::Workload;
using json = nlohmann::json;

TensorType f32(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kFloat32}; }
TensorType i32(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kInt32}; }
TensorType i8(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kInt8}; }
TensorType bf16(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kBFloat16}; }
TensorType i64(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kInt64}; }
TensorType b8(std::vector<int64_t> shape) { return TensorType{std::move(shape), DType::kBool}; }

// A chain of operators: the first consumes the listed inputs, each later one consumes
// the previous result plus any further inputs it names.
Workload chain(std::vector<TensorType> inputs, std::vector<OpCall> ops) {
  Workload w;
  w.inputs = std::move(inputs);
  w.ops = std::move(ops);
  w.outputs = {"op" + std::to_string(w.ops.size() - 1)};
  return w;
}

}  // namespace

std::vector<NamedWorkload> small_example_workloads() {
  std::vector<NamedWorkload> out;
  auto single = [&](std::string name, const std::string &op, std::vector<TensorType> inputs,
                    json attrs = json::object()) {
    out.push_back({std::move(name), Workload::single(op, std::move(inputs), std::move(attrs))});
  };

  // ---- convolution -------------------------------------------------------------------
  single("conv2d_nchw_s2_p1", "conv2d", {f32({1, 3, 7, 7}), f32({4, 3, 3, 3})},
         {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  single("conv2d_nchw_dilated_asym_pad", "conv2d", {f32({1, 2, 9, 8}), f32({3, 2, 3, 3})},
         {{"strides", {1, 2}}, {"pads", {2, 1, 1, 2}}, {"dilations", {2, 2}}});
  single("conv2d_nchw_groups2", "conv2d", {f32({1, 6, 5, 5}), f32({4, 3, 3, 3})},
         {{"pads", {1, 1, 1, 1}}, {"groups", 2}});
  single("conv2d_nchw_1x1_bias", "conv2d", {f32({2, 5, 3, 7}), f32({3, 5, 1, 1}), f32({3})});
  single("conv2d_nhwc_s2_p1", "conv2d", {f32({1, 7, 7, 3}), f32({3, 3, 3, 5})},
         {{"layout", "NHWC"}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  single("conv2d_nhwc_groups3_dilated", "conv2d", {f32({1, 7, 6, 6}), f32({2, 2, 2, 3})},
         {{"layout", "NHWC"}, {"groups", 3}, {"dilations", {2, 1}}, {"pads", {0, 1, 1, 0}}});
  single("depthwise_conv2d_nchw", "conv2d", {f32({1, 5, 7, 7}), f32({5, 1, 3, 3})},
         {{"groups", 5}, {"pads", {1, 1, 1, 1}}});
  single("depthwise_conv2d_multiplier2_s2", "conv2d", {f32({1, 3, 6, 6}), f32({6, 1, 3, 3})},
         {{"groups", 3}, {"strides", {2, 2}}, {"pads", {1, 0, 1, 0}}});
  single("depthwise_conv2d_nhwc", "conv2d", {f32({1, 6, 5, 4}), f32({3, 3, 1, 4})},
         {{"layout", "NHWC"}, {"groups", 4}, {"pads", {1, 1, 1, 1}}});
  single("conv2d_nchw_int8", "conv2d", {i8({1, 3, 5, 5}), i8({2, 3, 3, 3})}, {{"pads", {1, 1, 1, 1}}});

  // ---- matrix products ---------------------------------------------------------------
  single("dense", "dense", {f32({5, 7}), f32({3, 7})});
  single("dense_bias", "dense", {f32({3, 13}), f32({11, 13}), f32({11})});
  // bfloat16 operands, products accumulated in float32 (the result's type).
  single("dense_bf16", "dense", {bf16({5, 19}), bf16({9, 19})});
  single("matmul", "matmul", {f32({5, 7}), f32({7, 3})});
  single("matmul_transposed", "matmul", {f32({7, 5}), f32({3, 7})}, {{"transpose_a", true}, {"transpose_b", true}});
  single("batch_matmul", "batch_matmul", {f32({3, 5, 7}), f32({3, 7, 2})});
  single("batch_matmul_broadcast_transposed", "batch_matmul", {f32({1, 5, 4}), f32({2, 3, 5})},
         {{"transpose_a", true}, {"transpose_b", true}});

  // Winograd F(2x2,3x3) and F(4x4,3x3): outputs (5x7, 9x7) that the tiles do not
  // divide, asymmetric pads; the output transforms with a bias.
  single("winograd_input_transform_odd", "winograd_input_transform", {f32({1, 5, 7, 3})}, {{"pads", {1, 0, 1, 2}}});
  single("winograd_output_transform_bias", "winograd_output_transform", {f32({16, 12, 5}), f32({5})},
         {{"height", 5}, {"width", 7}});
  single("winograd_input_transform_f4", "winograd_input_transform", {f32({1, 9, 7, 3})},
         {{"pads", {1, 0, 1, 2}}, {"output_tile", 4}});
  single("winograd_output_transform_f4_bias", "winograd_output_transform", {f32({36, 6, 5}), f32({5})},
         {{"height", 9}, {"width", 7}, {"output_tile", 4}});

  // ---- pooling -----------------------------------------------------------------------
  single("max_pool2d_s2_p1", "max_pool2d", {f32({1, 3, 7, 7})},
         {{"kernel", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  single("max_pool2d_nhwc_dilated", "max_pool2d", {f32({1, 8, 7, 2})},
         {{"layout", "NHWC"}, {"kernel", {2, 3}}, {"dilations", {2, 1}}, {"pads", {0, 1, 1, 0}}});
  single("max_pool2d_int32", "max_pool2d", {i32({1, 2, 5, 5})},
         {{"kernel", {2, 2}}, {"strides", {2, 2}}, {"pads", {0, 0, 1, 1}}});
  single("avg_pool2d_s2_p1", "avg_pool2d", {f32({1, 2, 7, 7})},
         {{"kernel", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  single("avg_pool2d_include_pad", "avg_pool2d", {f32({1, 2, 5, 7})},
         {{"kernel", {2, 3}}, {"pads", {1, 0, 0, 2}}, {"count_include_pad", true}});
  single("avg_pool2d_dilated", "avg_pool2d", {f32({1, 2, 9, 9})},
         {{"kernel", {3, 3}}, {"strides", {2, 2}}, {"pads", {2, 2, 2, 2}}, {"dilations", {2, 2}}});
  single("global_avg_pool2d", "global_avg_pool2d", {f32({1, 5, 7, 3})});
  single("global_avg_pool2d_nhwc", "global_avg_pool2d", {f32({2, 3, 5, 3})}, {{"layout", "NHWC"}});

  // ---- element-wise ------------------------------------------------------------------
  single("relu", "relu", {f32({3, 5, 7})});
  // bfloat16 in and out: the result rounded to bfloat16 as it is stored.
  single("gelu_bf16", "gelu", {bf16({3, 21})});
  single("clip", "clip", {f32({2, 13})}, {{"min", -0.5}, {"max", 0.25}});
  single("sigmoid", "sigmoid", {f32({5, 7})});
  single("tanh", "tanh", {f32({5, 7})});
  single("erf", "erf", {f32({5, 7})});
  single("gelu", "gelu", {f32({3, 11})});
  single("cast_float_to_int", "cast", {f32({4, 9})}, {{"dtype", "int32"}});
  single("cast_int64_to_float", "cast", {i64({2, 7})}, {{"dtype", "float32"}});
  single("cast_int64_to_bool", "cast", {i64({3, 5})}, {{"dtype", "bool"}});
  single("cast_bool_to_float", "cast", {b8({3, 5})}, {{"dtype", "float32"}});
  single("logical_not", "logical_not", {b8({2, 9})});
  // An attention mask's masked_fill: a bool mask of one row broadcast over the scores.
  single("where_mask_broadcast", "where", {b8({1, 1, 7}), f32({1, 1, 1}), f32({2, 3, 7})});
  single("where_int64", "where", {b8({4, 3}), i64({4, 3}), i64({3})});
  single("equal_int64_broadcast", "equal", {i64({3, 4}), i64({4})});
  single("less", "less", {f32({2, 7}), f32({2, 7})});
  single("less_equal_int32", "less_equal", {i32({5, 3}), i32({1, 3})});
  single("greater", "greater", {f32({3, 6}), f32({1})});
  single("greater_equal_int64", "greater_equal", {i64({4, 5}), i64({4, 5})});
  // Token ids in [-7, 7] (the tests' integers) into 6 rows: negative ones wrap, 6 and 7
  // are clamped to the last row.
  // Resize: integer and fractional scales, every coordinate mode, both layouts.
  single("resize_nearest_asymmetric_floor", "resize", {f32({1, 2, 3, 4})},
         {{"sizes", {6, 8}},
          {"scales", {2.0, 2.0}},
          {"coordinate_transformation_mode", "asymmetric"},
          {"nearest_mode", "floor"}});
  single("resize_linear_half_pixel", "resize", {f32({1, 2, 5, 4})},
         {{"sizes", {7, 9}}, {"scales", {1.4, 2.25}}, {"mode", "linear"}});
  single("resize_linear_align_corners_nhwc", "resize", {f32({1, 4, 3, 2})},
         {{"sizes", {7, 5}},
          {"scales", {1.75, 5.0 / 3}},
          {"mode", "linear"},
          {"coordinate_transformation_mode", "align_corners"},
          {"layout", "NHWC"}});
  single("resize_linear_pytorch_half_pixel", "resize", {f32({1, 1, 4, 6})},
         {{"sizes", {1, 3}},
          {"scales", {0.25, 0.5}},
          {"mode", "linear"},
          {"coordinate_transformation_mode", "pytorch_half_pixel"}});
  single("resize_nearest_round_int32", "resize", {i32({1, 1, 3, 3})},
         {{"sizes", {5, 5}}, {"scales", {5.0 / 3, 5.0 / 3}}, {"nearest_mode", "round_prefer_ceil"}});
  single("take_embedding", "take", {f32({6, 5}), i64({2, 3})});
  single("take_inner_axis_int32", "take", {f32({3, 6, 2}), i32({4})}, {{"axis", 1}});
  single("exp", "exp", {f32({7, 3})});
  single("sqrt", "sqrt", {f32({5, 3})});
  single("log", "log", {f32({3, 5})});
  single("neg", "neg", {f32({13})});
  single("abs", "abs", {f32({2, 7})});
  single("add_broadcast", "add", {f32({2, 3, 5}), f32({3, 1})});
  single("add_int32", "add", {i32({3, 5}), i32({5})});
  single("sub_broadcast", "sub", {f32({5, 7}), f32({7})});
  single("mul_broadcast_both", "mul", {f32({1, 5}), f32({3, 1})});
  single("div", "div", {f32({3, 5}), f32({3, 5})});
  single("maximum_broadcast", "maximum", {f32({4, 1, 3}), f32({5, 1})});
  single("minimum", "minimum", {f32({7}), f32({7})});
  single("pow", "pow", {f32({3, 4}), f32({4})});

  // ---- reductions and normalisations -------------------------------------------------
  single("reduce_sum_axis1", "reduce_sum", {f32({3, 5, 7})}, {{"axes", {1}}});
  single("reduce_sum_all", "reduce_sum", {f32({3, 5})}, {{"keepdims", false}});
  single("reduce_mean_neg_axes", "reduce_mean", {f32({3, 5, 7})}, {{"axes", {-1, 0}}, {"keepdims", false}});
  single("reduce_max", "reduce_max", {f32({2, 3, 7})}, {{"axes", {2}}, {"keepdims", false}});
  single("reduce_min", "reduce_min", {f32({3, 2, 5})}, {{"axes", {0, 2}}});
  single("softmax", "softmax", {f32({3, 7})});
  single("softmax_axis1", "softmax", {f32({2, 5, 3})}, {{"axis", 1}});
  single("layer_norm", "layer_norm", {f32({3, 5, 7}), f32({7}), f32({7})});
  single("layer_norm_axis1_no_beta", "layer_norm", {f32({2, 3, 5}), f32({3, 5})}, {{"axis", 1}});

  // ---- layout transforms -------------------------------------------------------------
  single("transpose", "transpose", {f32({2, 3, 5})}, {{"perm", {2, 0, 1}}});
  single("transpose_int32_default", "transpose", {i32({3, 1, 5})});
  single("reshape", "reshape", {f32({2, 3, 5})}, {{"shape", {5, 0, -1}}});
  single("reshape_split", "reshape", {f32({6, 5})}, {{"shape", {3, 1, 10}}});
  single("flatten", "flatten", {f32({2, 3, 5, 1})}, {{"axis", 2}});
  single("concat_axis1", "concat", {f32({2, 3, 5}), f32({2, 1, 5}), f32({2, 4, 5})}, {{"axis", 1}});
  single("concat_int32_last_axis", "concat", {i32({3, 2}), i32({3, 5})}, {{"axis", -1}});
  single("slice_strided", "slice", {f32({4, 9, 7})},
         {{"begin", {1, 8, 0}}, {"step", {1, -2, 3}}, {"shape", {2, 4, 3}}});
  single("slice_row", "slice", {f32({2, 50, 96})}, {{"begin", {0, 0, 0}}, {"step", {1, 1, 1}}, {"shape", {2, 1, 96}}});

  // ---- fused subgraphs ---------------------------------------------------------------
  out.push_back({"conv2d_bias_relu_nchw", chain({f32({1, 3, 7, 7}), f32({5, 3, 3, 3}), f32({5})},
                                                {OpCall{"conv2d", {{"pads", {1, 1, 1, 1}}}, {"in0", "in1", "in2"}},
                                                 OpCall{"relu", json::object(), {"op0"}}})});
  out.push_back(
      {"conv2d_bias_relu_nhwc",
       chain(
           {f32({1, 6, 6, 4}), f32({3, 3, 4, 5}), f32({5})},
           {OpCall{"conv2d", {{"layout", "NHWC"}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}, {"in0", "in1", "in2"}},
            OpCall{"relu", json::object(), {"op0"}}})});
  out.push_back({"dense_bias_gelu",
                 chain({f32({3, 13}), f32({7, 13}), f32({7})}, {OpCall{"dense", json::object(), {"in0", "in1", "in2"}},
                                                                OpCall{"gelu", json::object(), {"op0"}}})});
  out.push_back(
      {"matmul_add", chain({f32({5, 7}), f32({7, 3}), f32({3})}, {OpCall{"matmul", json::object(), {"in0", "in1"}},
                                                                  OpCall{"add", json::object(), {"op0", "in2"}}})});
  out.push_back(
      {"depthwise_conv2d_bias_clip",
       chain({f32({1, 4, 7, 5}), f32({4, 1, 3, 3}), f32({4})},
             {OpCall{"conv2d", {{"groups", 4}, {"strides", {2, 1}}, {"pads", {1, 1, 1, 1}}}, {"in0", "in1", "in2"}},
              OpCall{"clip", {{"min", 0.0}, {"max", 0.5}}, {"op0"}}})});
  out.push_back({"batch_matmul_softmax",
                 chain({f32({2, 3, 5}), f32({2, 5, 7})}, {OpCall{"batch_matmul", json::object(), {"in0", "in1"}},
                                                          OpCall{"softmax", json::object(), {"op0"}}})});
  return out;
}

void PrintTo(const NamedWorkload &w, std::ostream *os) { *os << w.name; }

}  // namespace kiln::ops
