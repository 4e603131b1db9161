#!/usr/bin/env python3
"""Exports the PyTorch fixtures of this folder that take several inputs or give several
outputs, the way users export models today, with ONNX Runtime's outputs.

- bert_ids_*: a BERT-style encoder (vocabulary 100, width 32, 2 layers, 2 heads, 16
  tokens) taking input_ids, token_type_ids and attention_mask (int64, 1x16; the mask
  ends in padding) and giving the sequence (1x16x32) and the pooled class token (1x32),
  written as Hugging Face's BertModel computes it (embedding Gathers, the mask Cast to
  float and turned into an additive mask, Erf GELU, LayerNorm):
    bert_ids_opset14    TorchScript exporter, opset 14 (IR 7)
    bert_ids_opset17    TorchScript exporter, opset 17 (IR 8, LayerNormalization)
    bert_ids_dynamic    TorchScript exporter, opset 17, batch and sequence dynamic
                        (import with --shape NAME=1x16 for each input)
    bert_ids_opset18    torch.export-based exporter (torch.onnx.export's default),
                        opset 18, IR 10, weights in bert_ids_opset18.onnx.data
    bert_ids_opset19/20/21  bert_ids_opset18 converted with onnx.version_converter
                        (IR 9, 9 and 10)
    bert_ids_masked_fill  the mask made as current transformers make it (the inverted
                        mask Cast to bool, then masked_fill: a run-time Where),
                        default exporter
- vit_cls: a ViT (1x3x32x32 image, 8x8 patches, a class token expanded and
  concatenated, learned positions, 2 layers, head on the class token), opset 17 and,
  as vit_cls_opset18, the default exporter.
- googlenet_pools: GoogLeNet's stem and an inception block on 1x3x57x57: every MaxPool
  with ceil_mode=True and a partial last window.
- upsampling_neck: nearest x2 upsampling (a detector's neck) and bilinear resizes to an
  odd size with and without align_corners, opset 17 and, as upsampling_neck_opset18,
  the default exporter.
- two_io: two float inputs, two outputs.

NAME.in.INPUT.npy are the seeded inputs, NAME.out.OUTPUT.npy ONNX Runtime's outputs.
Regenerate (needs `pip install torch onnxscript onnx onnxruntime numpy`):

    python3 tests/frontend/models/export_torch_models.py [OUTPUT_DIR]
"""
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import version_converter

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


class Attention(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(width, width) for _ in range(4))

    def forward(self, x, mask=None):
        b, s, w = x.shape
        d = w // self.heads
        q, k, v = (p(x).view(b, s, self.heads, d).transpose(1, 2) for p in (self.q, self.k, self.v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        if mask is not None:
            scores = scores + mask
        return self.o((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, w))


class Layer(torch.nn.Module):
    def __init__(self, width, heads, ffn, eps):
        super().__init__()
        self.attention = Attention(width, heads)
        self.norm1 = torch.nn.LayerNorm(width, eps=eps)
        self.up = torch.nn.Linear(width, ffn)
        self.down = torch.nn.Linear(ffn, width)
        self.norm2 = torch.nn.LayerNorm(width, eps=eps)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.attention(x, mask))
        return self.norm2(x + self.down(torch.nn.functional.gelu(self.up(x))))


class Bert(torch.nn.Module):
    def __init__(self, vocab=100, width=32, layers=2, heads=2, ffn=64, positions=32, masked_fill=False):
        super().__init__()
        self.masked_fill = masked_fill
        self.word = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Embedding(positions, width)
        self.segment = torch.nn.Embedding(2, width)
        self.norm = torch.nn.LayerNorm(width, eps=1e-12)
        self.layers = torch.nn.ModuleList(Layer(width, heads, ffn, 1e-12) for _ in range(layers))
        self.pool = torch.nn.Linear(width, width)

    def forward(self, input_ids, token_type_ids, attention_mask):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.word(input_ids) + self.position(positions) + self.segment(token_type_ids))
        if self.masked_fill:  # current transformers: the inverted mask as bool, then masked_fill
            inverted = 1.0 - attention_mask[:, None, None, :].to(x.dtype)
            mask = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(x.dtype).min)
        else:
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pool(x[:, 0]))


class ViT(torch.nn.Module):
    def __init__(self, width=48, patch=8, image=32, layers=2, heads=3, classes=10):
        super().__init__()
        self.patches = torch.nn.Conv2d(3, width, patch, stride=patch)
        self.cls = torch.nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.positions = torch.nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, width) * 0.02)
        self.layers = torch.nn.ModuleList(Layer(width, heads, 2 * width, 1e-6) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width, eps=1e-6)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, image):
        x = self.patches(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.positions
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)[:, 0])


class GoogLeNetPools(torch.nn.Module):
    def __init__(self):
        super().__init__()
        relu = torch.nn.ReLU()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 7, stride=2, padding=3), relu,
                                        torch.nn.MaxPool2d(3, stride=2, ceil_mode=True),
                                        torch.nn.Conv2d(16, 24, 3, padding=1), relu,
                                        torch.nn.MaxPool2d(3, stride=2, ceil_mode=True))
        self.b1 = torch.nn.Conv2d(24, 8, 1)
        self.b2 = torch.nn.Sequential(torch.nn.Conv2d(24, 8, 1), relu, torch.nn.Conv2d(8, 12, 3, padding=1))
        self.b3 = torch.nn.Sequential(torch.nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                      torch.nn.Conv2d(24, 8, 1))
        self.pool = torch.nn.MaxPool2d(3, stride=2, ceil_mode=True)

    def forward(self, x):
        x = self.stem(x)
        return self.pool(torch.relu(torch.cat([self.b1(x), self.b2(x), self.b3(x)], 1)))


class UpsamplingNeck(torch.nn.Module):
    """A detector's neck and a segmentation head: nearest x2 upsampling concatenated with
    a skip connection (YOLO's FPN), bilinear resizes to an odd size with and without
    align_corners."""

    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv2d(6, 8, 3, stride=2, padding=1)
        self.mix = torch.nn.Conv2d(14, 4, 3, padding=1)

    def forward(self, x):
        up = torch.nn.functional.interpolate(torch.relu(self.down(x)), scale_factor=2.0, mode="nearest")
        y = self.mix(torch.cat([up, x], 1))
        a = torch.nn.functional.interpolate(y, size=(23, 17), mode="bilinear", align_corners=False)
        b = torch.nn.functional.interpolate(y, size=(23, 17), mode="bilinear", align_corners=True)
        return a + b


class TwoInTwoOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, left, right):
        mixed = torch.relu(self.a(left) + right)
        return mixed * right, self.b(mixed).softmax(-1)


def save_io(name, path, feed):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outputs = session.run(None, feed)
    for key, value in feed.items():
        np.save(os.path.join(OUT, f"{name}.in.{key}.npy"), value)
    for info, value in zip(session.get_outputs(), outputs):
        np.save(os.path.join(OUT, f"{name}.out.{info.name}.npy"), value)
    model = onnx.load(path, load_external_data=False)
    print(name, "IR", model.ir_version, "opset", model.opset_import[0].version,
          {k: v.shape for k, v in feed.items()}, "->", [o.shape for o in outputs])


def export(model, args, name, inputs, outputs, opset, dynamo=False, dynamic_axes=None):
    path = os.path.join(OUT, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=inputs, output_names=outputs, opset_version=opset,
                          dynamo=dynamo, dynamic_axes=dynamic_axes)
    feed = {n: a.numpy() for n, a in zip(inputs, args)}
    save_io(name, path, feed)
    return path


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    bert = Bert().eval()
    ids = torch.randint(0, 100, (1, 16))
    segments = torch.cat([torch.zeros(1, 9, dtype=torch.int64), torch.ones(1, 7, dtype=torch.int64)], 1)
    mask = torch.cat([torch.ones(1, 12, dtype=torch.int64), torch.zeros(1, 4, dtype=torch.int64)], 1)
    args = (ids, segments, mask)
    names = ["input_ids", "token_type_ids", "attention_mask"]
    outs = ["sequence", "pooled"]
    export(bert, args, "bert_ids_opset14", names, outs, 14)
    export(bert, args, "bert_ids_opset17", names, outs, 17)
    export(bert, args, "bert_ids_dynamic", names, outs, 17,
           dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names})
    path18 = export(bert, args, "bert_ids_opset18", names, outs, 18, dynamo=True)
    base = onnx.load(path18)
    feed = {n: a.numpy() for n, a in zip(names, args)}
    for opset, ir in ((19, 9), (20, 9), (21, 10)):
        converted = version_converter.convert_version(base, opset)
        converted.ir_version = ir
        path = os.path.join(OUT, f"bert_ids_opset{opset}.onnx")
        onnx.save(converted, path)
        save_io(f"bert_ids_opset{opset}", path, feed)

    torch.manual_seed(0)
    export(Bert(masked_fill=True).eval(), args, "bert_ids_masked_fill", names, outs, 18, dynamo=True)

    vit = ViT().eval()
    image = (torch.randn(1, 3, 32, 32),)
    export(vit, image, "vit_cls", ["image"], ["logits"], 17)
    export(vit, image, "vit_cls_opset18", ["image"], ["logits"], 18, dynamo=True)
    export(GoogLeNetPools().eval(), (torch.randn(1, 3, 57, 57),), "googlenet_pools", ["image"], ["features"], 17)
    torch.manual_seed(0)
    neck = UpsamplingNeck().eval()
    feature_map = (torch.randn(1, 6, 16, 12),)
    export(neck, feature_map, "upsampling_neck", ["features"], ["mask"], 17)
    export(neck, feature_map, "upsampling_neck_opset18", ["features"], ["mask"], 18, dynamo=True)
    export(TwoInTwoOut().eval(), (torch.randn(1, 8), torch.randn(1, 8)), "two_io", ["left", "right"],
           ["product", "probs"], 17)


if __name__ == "__main__":
    main()
