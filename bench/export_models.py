#!/usr/bin/env python3
"""Exports the models the whole-model benchmarks run, as users export them today.

torchvision CNNs (random weights, batch 1, 3x224x224) and a BERT-style encoder that
takes token ids (input_ids, token_type_ids, attention_mask: int64, 1 x SEQ), written
with torch.onnx.export's current default exporter (torch.export-based, opset 18, IR
10, weights in a NAME.onnx.data file beside the model) or with the older
TorchScript-based one (--exporter legacy, weights inside the file).

Needs PyTorch, torchvision and onnxscript from PyPI:
  pip install torch torchvision onnxscript onnx
Usage: bench/export_models.py [--out DIR] [--exporter dynamo|legacy] [--opset N] [--dynamic] [NAME...]
Names: squeezenet shufflenet mnasnet efficientnet regnet googlenet resnet50 vit bert
bert-small bert-tiny gemm (default: all but resnet50, vit, bert-small, bert-tiny and gemm). bert is
BERT-base (12 layers of width 768, 12 heads); bert-small has 4 layers of width 512, 8
heads; bert-tiny 2 layers of width 128, 2 heads. --dynamic exports the BERT encoders
with a dynamic sequence axis named "sequence" (the legacy exporter's dynamic_axes), as
NAME-dynamic.onnx. gemm is a dense layer y = x W^T, x [M, 768], W [768, 768] (with
--dynamic, M is a dynamic axis named "M"), its weight also saved as gemm.weight.npy for
bench/dynamic_gemm.cc.
"""
import argparse
import math
import os
import sys

import torch
import torchvision


class BertEncoder(torch.nn.Module):
    """BERT-base's structure (embeddings of ids, positions and segments, LayerNorm,
    post-norm layers with a masked softmax attention and a GELU feed-forward), written
    out the way Hugging Face's BertModel computes it, so the export has the same
    Gather / Cast / Unsqueeze / Sub / Mul mask arithmetic."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, max_pos=512):
        super().__init__()
        self.heads = heads
        self.word = torch.nn.Embedding(vocab, hidden)
        self.position = torch.nn.Embedding(max_pos, hidden)
        self.segment = torch.nn.Embedding(2, hidden)
        self.norm = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.Module()
            layer.qkv = torch.nn.ModuleList([torch.nn.Linear(hidden, hidden) for _ in range(3)])
            layer.out = torch.nn.Linear(hidden, hidden)
            layer.norm1 = torch.nn.LayerNorm(hidden, eps=1e-12)
            layer.up = torch.nn.Linear(hidden, ffn)
            layer.down = torch.nn.Linear(ffn, hidden)
            layer.norm2 = torch.nn.LayerNorm(hidden, eps=1e-12)
            self.layers.append(layer)

    def forward(self, input_ids, token_type_ids, attention_mask):
        batch, seq = input_ids.shape
        positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.word(input_ids) + self.position(positions) + self.segment(token_type_ids))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        head = x.shape[-1] // self.heads
        for layer in self.layers:
            q, k, v = [p(x).view(batch, seq, self.heads, head).transpose(1, 2) for p in layer.qkv]
            scores = q @ k.transpose(-1, -2) / math.sqrt(head) + mask
            context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, -1)
            x = layer.norm1(x + layer.out(context))
            x = layer.norm2(x + layer.down(torch.nn.functional.gelu(layer.up(x))))
        return x


CNNS = {
    "squeezenet": lambda: torchvision.models.squeezenet1_0(weights=None),
    "shufflenet": lambda: torchvision.models.shufflenet_v2_x1_0(weights=None),
    "mobilenet": lambda: torchvision.models.mobilenet_v2(weights=None),
    "mnasnet": lambda: torchvision.models.mnasnet1_0(weights=None),
    "efficientnet": lambda: torchvision.models.efficientnet_b0(weights=None),
    "regnet": lambda: torchvision.models.regnet_y_400mf(weights=None),
    "googlenet": lambda: torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True),
    "resnet50": lambda: torchvision.models.resnet50(weights=None),
    "vit": lambda: torchvision.models.vit_b_16(weights=None),
}


BERTS = {
    "bert": dict(hidden=768, layers=12, heads=12, ffn=3072),
    "bert-small": dict(hidden=512, layers=4, heads=8, ffn=2048),
    "bert-tiny": dict(hidden=128, layers=2, heads=2, ffn=512),
}


def export(name, out_dir, exporter, opset, seq, dynamic=False):
    torch.manual_seed(0)
    if name in BERTS:
        model = BertEncoder(**BERTS[name]).eval()
        ids = torch.randint(0, 30522, (1, seq))
        args = (ids, torch.zeros_like(ids), torch.ones_like(ids))
        names = ["input_ids", "token_type_ids", "attention_mask"]
    elif name in CNNS:
        model = CNNS[name]().eval()
        args = (torch.randn(1, 3, 224, 224),)
        names = ["input"]
    if name == "gemm":
        model = torch.nn.Linear(768, 768, bias=False).eval()
        args = (torch.randn(64, 768),)
        names = ["x"]
        import numpy
        numpy.save(os.path.join(out_dir, "gemm.weight.npy"), model.weight.detach().numpy())
    path = os.path.join(out_dir, name + ("-dynamic" if dynamic else "") + ".onnx")
    extra = {}
    if dynamic and name == "gemm":
        extra = dict(dynamic_axes={"x": {0: "M"}, "output": {0: "M"}}, dynamo=False)
    elif dynamic:
        if name not in BERTS:
            sys.exit("--dynamic exports the BERT encoders only")
        # The legacy exporter names the axis as given; torch.export's names are its own.
        extra = dict(dynamic_axes={n: {1: "sequence"} for n in names} | {"output": {1: "sequence"}}, dynamo=False)
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=names, output_names=["output"], opset_version=opset,
                          **({"dynamo": exporter == "dynamo"} | extra))
    print(path, file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="models")
    p.add_argument("--exporter", choices=["dynamo", "legacy"], default="dynamo")
    p.add_argument("--opset", type=int, default=0, help="0: 18 for dynamo, 17 for legacy")
    p.add_argument("--seq", type=int, default=128, help="the BERT encoder's sequence length")
    p.add_argument("--dynamic", action="store_true",
                   help="BERT encoders with a dynamic sequence axis (legacy exporter, opset 17 unless --opset)")
    p.add_argument("names", nargs="*",
                   default=["squeezenet", "shufflenet", "mnasnet", "efficientnet", "regnet", "googlenet", "bert"])
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    opset = a.opset or (18 if a.exporter == "dynamo" and not a.dynamic else 17)
    for name in a.names:
        export(name, a.out, a.exporter, opset, a.seq, a.dynamic)


if __name__ == "__main__":
    main()
