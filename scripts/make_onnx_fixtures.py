#!/usr/bin/python3
"""Writes the ONNX test data of tests/data/onnx/: graphs exported by PyTorch without their
weights (export_params=False, so each file is a few tens of kB), the parameter counts and
FLOPs PyTorch reports for each (reference.csv), and small malformed (or unmappable)
models for the importer's bad-input tests.

Needs Debian's python3-torch, python3-torchvision and python3-onnx (run with /usr/bin/python3:
`make test` does not need them, the files are committed). Usage:
    /usr/bin/python3 scripts/make_onnx_fixtures.py [OUT_DIR]

Graphs are exported in training mode (torch.onnx.TrainingMode.TRAINING): in inference mode
the exporter folds each BatchNormalization into the convolution before it, and the testbed
trains. FLOPs are PyTorch's profiler count (torch.profiler, with_flops=True) of one forward
pass of one sample: 2 per multiply-add of aten::conv2d, aten::addmm, aten::mm, aten::bmm,
aten::matmul; the column matrix_flops is that sum.
"""
import csv
import math
import os
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.profiler import ProfilerActivity, profile

OPSET = 17
MATRIX_OPS = ("aten::conv2d", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul", "aten::baddbmm")


class GPT2Block(nn.Module):
    """A GPT-2-style causal language model with one transformer block (GPT-2 124M sizes):
    token and position embeddings, pre-LN attention and MLP with the tanh GELU, final layer
    norm and an (untied) head over the vocabulary."""

    def __init__(self, vocab=50257, ctx=1024, d=768, heads=12):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.drop = nn.Dropout(0.1)

    def forward(self, idx):
        b, t = idx.shape
        pos = torch.arange(t, device=idx.device).unsqueeze(0)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        h = self.ln_1(x)
        q, k, v = self.c_attn(h).split(h.shape[-1], dim=2)
        hd = h.shape[-1] // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=idx.device))
        att = att.masked_fill(~mask, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, h.shape[-1])
        x = x + self.drop(self.c_proj(y))
        x = x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))
        return self.lm_head(self.ln_f(x))


class UnscaledAttention(nn.Module):
    """Self-attention whose scores are not scaled by 1/sqrt(head size): no attention layer
    computes that, so the importer must refuse it."""

    def __init__(self, vocab=50, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, idx):
        x = self.wte(idx)
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
        return y.transpose(1, 2).reshape(b, t, d)


class ConvSin(nn.Module):
    """A convolution followed by an operator that maps to no layer (Sin)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return torch.sin(self.conv(x))


def export(model, example, path, dynamic_axes=None):
    model.train()
    torch.onnx.export(model, example, path, export_params=False, input_names=["input"],
                      output_names=["output"], opset_version=OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes=dynamic_axes)


def pytorch_counts(model, example):
    """Parameters (model.parameters(), as PyTorch reports them) and profiler FLOPs of one
    forward pass."""
    params = sum(p.numel() for p in model.parameters())
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        model(example)
    by_op = {e.key: e.flops for e in prof.key_averages() if e.flops}
    matrix = sum(v for k, v in by_op.items() if k in MATRIX_OPS)
    return params, matrix, sum(by_op.values()), by_op


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "onnx")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    image224 = torch.zeros(1, 3, 224, 224)
    nets = [
        ("resnet50", torchvision.models.resnet50(weights=None), image224),
        ("vgg16", torchvision.models.vgg16(weights=None), image224),
        # the exported training graph has no auxiliary head, so the model is built without it
        ("inception_v3", torchvision.models.inception_v3(weights=None, aux_logits=False,
                                                         init_weights=False), torch.zeros(1, 3, 299, 299)),
        ("vit_b_16", torchvision.models.vit_b_16(weights=None), image224),
        ("gpt2_block", GPT2Block(), torch.zeros(1, 128, dtype=torch.long)),
    ]
    rows = []
    for name, model, example in nets:
        export(model, example, os.path.join(out, name + ".onnx"))
        params, matrix, total, by_op = pytorch_counts(model.train(), example)
        shape = "x".join(str(d) for d in example.shape)
        rows.append([name, shape, params, matrix, total])
        print(f"{name}: input {shape}, {params} parameters, {matrix} matrix FLOPs, {total} profiler FLOPs {by_op}")
    with open(os.path.join(out, "reference.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "input_shape", "params", "matrix_flops", "profiler_flops"])
        w.writerows(rows)

    # bad input: a dynamic height and width, an unmapped operator, an unsupported opset
    small = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
    export(small, torch.zeros(1, 3, 32, 32), os.path.join(out, "bad_dynamic_hw.onnx"),
           dynamic_axes={"input": {0: "batch", 2: "height", 3: "width"}})
    export(small, torch.zeros(1, 3, 32, 32), os.path.join(out, "small_dynamic_batch.onnx"),
           dynamic_axes={"input": {0: "batch"}})
    export(ConvSin(), torch.zeros(1, 3, 32, 32), os.path.join(out, "bad_unmapped_op.onnx"))
    export(UnscaledAttention(), torch.zeros(1, 8, dtype=torch.long),
           os.path.join(out, "bad_attention_scale.onnx"))
    m = onnx.load(os.path.join(out, "small_dynamic_batch.onnx"))
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 99
    onnx.save(m, os.path.join(out, "bad_opset.onnx"))


if __name__ == "__main__":
    main()
