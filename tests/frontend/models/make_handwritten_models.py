#!/usr/bin/env python3
"""Builds the hand-written ONNX test models of this folder and their reference outputs.

The exported fixtures (resnet18's family, bert_tiny, mlp, tiny_cnn) come from PyTorch;
these four are written node by node with onnx.helper, to cover what other exporters
and model families emit, on shapes without round numbers:

- mobilenet_block: MobileNetV2's inverted residuals on 1x3x32x32: ReLU6 as Clip with
  constant bounds, an unfolded BatchNormalization, depthwise convolutions (stride 1 and
  2), a residual Add, GlobalAveragePool, Flatten, Gemm (transB=1).
- odd_cnn: 1x5x23x17 input, a 3x3 convolution with dilation 2, stride (2, 1) and
  asymmetric pads, SiLU (Sigmoid, Mul), MaxPool and AveragePool (count_include_pad=0)
  with pads, Concat, Reshape to (1, -1), Gemm with the weight as given (transB=0).
- token_head: a transformer's head on a computed 2x11x24 sequence: Gather of the class
  token (a scalar index) and of a list of tokens (one negative index), a Slice with a
  negative step, Flatten, MatMul, Add.
- attention_block: an encoder layer at opset 17 with 50 tokens, width 96 and 3 heads:
  LayerNormalization, Q/K/V MatMul + Add, Reshape with 0 dims, Transpose, scaled
  attention with Softmax, the Erf form of GELU, residual Adds.

NAME.input.bin / NAME.ref.bin are raw little-endian float32: a seeded input and ONNX
Runtime's output for it. Regenerate (needs `pip install onnx onnxruntime numpy`):

    python3 tests/frontend/models/make_handwritten_models.py [OUTPUT_DIR]
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)
def W(name, *shape, scale=None):
    a = rng.standard_normal(shape).astype(np.float32)
    a *= scale if scale is not None else (1.0 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 1))
    return nh.from_array(a, name)
def C(name, arr): return nh.from_array(np.asarray(arr), name)

def save(name, nodes, inits, inp, out, opset=13, feed=None):
    g = h.make_graph(nodes, name, [inp], [out], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name + ".onnx"))
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = feed if feed is not None else rng.standard_normal(shape).astype(np.float32)
    s = ort.InferenceSession(os.path.join(OUT, name + ".onnx"), providers=["CPUExecutionProvider"])
    y = s.run(None, {inp.name: x})[0]
    x.astype("<f4").tofile(os.path.join(OUT, name + ".input.bin"))
    y.astype("<f4").tofile(os.path.join(OUT, name + ".ref.bin"))
    print(name, x.shape, "->", y.shape)

# A. MobileNetV2-style blocks with ReLU6 as Clip(min,max constants), one unfolded BatchNorm
n, i = [], []
def conv(x, y, cin, cout, k, s=1, g=1, pad=None, bias=True):
    p = pad if pad is not None else [k // 2] * 4
    i.append(W(y + "_w", cout, cin // g, k, k))
    ins = [x, y + "_w"]
    if bias: i.append(W(y + "_b", cout, scale=0.1)); ins.append(y + "_b")
    n.append(h.make_node("Conv", ins, [y], kernel_shape=[k, k], strides=[s, s], pads=p, group=g))
def relu6(x, y):
    n.append(h.make_node("Clip", [x, "c0", "c6"], [y]))
i += [C("c0", np.float32(0)), C("c6", np.float32(6))]
conv("x", "c1", 3, 32, 3, 2, bias=False)
i += [C("bn_s", rng.uniform(0.5, 1.5, 32).astype(np.float32)), C("bn_b", rng.standard_normal(32).astype(np.float32) * 0.1),
      C("bn_m", rng.standard_normal(32).astype(np.float32) * 0.1), C("bn_v", rng.uniform(0.5, 2, 32).astype(np.float32))]
n.append(h.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn1"], epsilon=1e-5))
relu6("bn1", "r1")
conv("r1", "e1", 32, 96, 1); relu6("e1", "e1r")
conv("e1r", "d1", 96, 96, 3, 1, g=96); relu6("d1", "d1r")
conv("d1r", "p1", 96, 32, 1)
n.append(h.make_node("Add", ["p1", "r1"], ["a1"]))
conv("a1", "e2", 32, 144, 1); relu6("e2", "e2r")
conv("e2r", "d2", 144, 144, 3, 2, g=144); relu6("d2", "d2r")
conv("d2r", "p2", 144, 40, 1)
conv("p2", "h1", 40, 160, 1); relu6("h1", "h1r")
n.append(h.make_node("GlobalAveragePool", ["h1r"], ["gap"]))
n.append(h.make_node("Flatten", ["gap"], ["fl"], axis=1))
i.append(W("fc_w", 10, 160)); i.append(W("fc_b", 10, scale=0.1))
n.append(h.make_node("Gemm", ["fl", "fc_w", "fc_b"], ["y"], transB=1))
save("mobilenet_block", n, i, h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 32, 32]), h.make_tensor_value_info("y", TP.FLOAT, [1, 10]))

# B. odd shapes: dilation, asymmetric pads, stride (2,1), SiLU, pools with pads, concat, Gemm transB=0
n, i = [], []
i.append(W("w1", 7, 5, 3, 3))
n.append(h.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 0, 2, 1], strides=[2, 1]))
n.append(h.make_node("Sigmoid", ["c1"], ["sg"])); n.append(h.make_node("Mul", ["c1", "sg"], ["silu"]))
n.append(h.make_node("MaxPool", ["silu"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
n.append(h.make_node("AveragePool", ["silu"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0))
n.append(h.make_node("Concat", ["mp", "ap"], ["cat"], axis=1))
n.append(h.make_node("Reshape", ["cat", "shp"], ["flat"])); i.append(C("shp", np.array([1, -1], dtype=np.int64)))
# compute flat size with ORT on a partial graph
g = h.make_graph(n, "p", [h.make_tensor_value_info("x", TP.FLOAT, [1, 5, 23, 17])], [h.make_tensor_value_info("flat", TP.FLOAT, None)], i)
mm = h.make_model(g, opset_imports=[h.make_opsetid("", 13)]); mm.ir_version = 8
K = ort.InferenceSession(mm.SerializeToString()).run(None, {"x": np.zeros((1, 5, 23, 17), np.float32)})[0].shape[1]
i.append(W("fw", K, 11, scale=1 / np.sqrt(K))); i.append(W("fb", 11, scale=0.1))
n.append(h.make_node("Gemm", ["flat", "fw", "fb"], ["y"]))
save("odd_cnn", n, i, h.make_tensor_value_info("x", TP.FLOAT, [1, 5, 23, 17]), h.make_tensor_value_info("y", TP.FLOAT, [1, 11]))

# C. transformer block, opset 17: seq 50, hidden 96, 3 heads, LayerNormalization, Erf GELU
S, D, H = 50, 96, 3; dh = D // H
n, i = [], []
i += [C("ln_s", rng.uniform(0.5, 1.5, D).astype(np.float32)), C("ln_b", rng.standard_normal(D).astype(np.float32) * 0.1)]
n.append(h.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5))
for nm in "qkv":
    i.append(W(nm + "_w", D, D)); i.append(W(nm + "_b", D, scale=0.1))
    n.append(h.make_node("MatMul", ["ln", nm + "_w"], [nm + "_m"])); n.append(h.make_node("Add", [nm + "_m", nm + "_b"], [nm + "_a"]))
    n.append(h.make_node("Reshape", [nm + "_a", "hs"], [nm + "_r"]))
    n.append(h.make_node("Transpose", [nm + "_r"], [nm + "_t"], perm=[0, 2, 1, 3] if nm != "k" else [0, 2, 3, 1]))
i.append(C("hs", np.array([0, 0, H, dh], dtype=np.int64)))
n.append(h.make_node("MatMul", ["q_t", "k_t"], ["sc"]))
i.append(C("sq", np.float32(np.sqrt(dh))))
n.append(h.make_node("Div", ["sc", "sq"], ["scd"]))
n.append(h.make_node("Softmax", ["scd"], ["pr"], axis=-1))
n.append(h.make_node("MatMul", ["pr", "v_t"], ["ctx"]))
n.append(h.make_node("Transpose", ["ctx"], ["ctt"], perm=[0, 2, 1, 3]))
n.append(h.make_node("Reshape", ["ctt", "os"], ["ctr"])); i.append(C("os", np.array([1, S, D], dtype=np.int64)))
i.append(W("o_w", D, D)); n.append(h.make_node("MatMul", ["ctr", "o_w"], ["om"]))
n.append(h.make_node("Add", ["om", "x"], ["res1"]))
n.append(h.make_node("LayerNormalization", ["res1", "ln_s", "ln_b"], ["ln2"], axis=-1, epsilon=1e-5))
i.append(W("f1", D, 4 * D)); i.append(W("f1b", 4 * D, scale=0.1))
n.append(h.make_node("MatMul", ["ln2", "f1"], ["h1"])); n.append(h.make_node("Add", ["h1", "f1b"], ["h1b"]))
i += [C("rt2", np.float32(np.sqrt(2))), C("one", np.float32(1)), C("half", np.float32(0.5))]
n += [h.make_node("Div", ["h1b", "rt2"], ["g1"]), h.make_node("Erf", ["g1"], ["g2"]), h.make_node("Add", ["g2", "one"], ["g3"]),
      h.make_node("Mul", ["h1b", "g3"], ["g4"]), h.make_node("Mul", ["g4", "half"], ["gelu"])]
i.append(W("f2", 4 * D, D)); n.append(h.make_node("MatMul", ["gelu", "f2"], ["h2"]))
n.append(h.make_node("Add", ["h2", "res1"], ["y"]))
save("attention_block", n, i, h.make_tensor_value_info("x", TP.FLOAT, [1, S, D]), h.make_tensor_value_info("y", TP.FLOAT, [1, S, D]), opset=17)

# D. a transformer's head on a computed sequence: Gather of constant indices, Slice with a negative step
n, i = [], []
i.append(W("w", 24, 24))
n.append(h.make_node("MatMul", ["x", "w"], ["m"]))
n.append(h.make_node("Relu", ["m"], ["r"]))
i.append(C("cls", np.array(0, dtype=np.int64)))
n.append(h.make_node("Gather", ["r", "cls"], ["tok"], axis=1))  # [2, 24]
i.append(C("two", np.array([3, -1], dtype=np.int64)))
n.append(h.make_node("Gather", ["r", "two"], ["toks"], axis=1))  # [2, 2, 24]
i += [C("s0", np.array([-1], dtype=np.int64)), C("e0", np.array([-100], dtype=np.int64)),
      C("a0", np.array([2], dtype=np.int64)), C("st0", np.array([-3], dtype=np.int64))]
n.append(h.make_node("Slice", ["toks", "s0", "e0", "a0", "st0"], ["rev"]))  # [2, 2, 8]
n.append(h.make_node("Flatten", ["rev"], ["rf"], axis=1))  # [2, 16]
i.append(W("w2", 24, 16))
n.append(h.make_node("MatMul", ["tok", "w2"], ["tm"]))
n.append(h.make_node("Add", ["tm", "rf"], ["y"]))
save("token_head", n, i, h.make_tensor_value_info("x", TP.FLOAT, [2, 11, 24]), h.make_tensor_value_info("y", TP.FLOAT, [2, 16]))
