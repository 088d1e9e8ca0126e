#!/usr/bin/python3
"""Writes the ONNX test data of tests/data/onnx/: graphs exported by PyTorch without their
weights (export_params=False, so each file is a few tens of kB; one small model, *_weights,
with them), the parameter counts and
FLOPs PyTorch reports for each (reference.csv; a tied weight, one parameter in PyTorch, is
counted once), and small malformed (or unmappable)
models for the importer's bad-input tests.

Needs Debian's python3-torch, python3-torchvision and python3-onnx (run with /usr/bin/python3:
`make test` does not need them, the files are committed). Usage:
    /usr/bin/python3 scripts/make_onnx_fixtures.py [OUT_DIR]

Graphs are exported in training mode (torch.onnx.TrainingMode.TRAINING): in inference mode
the exporter folds each BatchNormalization into the convolution before it, and the testbed
trains. FLOPs are PyTorch's profiler count (torch.profiler, with_flops=True) of one forward
pass of one sample: 2 per multiply-add of aten::conv2d, aten::addmm, aten::mm, aten::bmm,
aten::matmul, and of each Conv1d, which the profiler does not count (pytorch_counts); the
column matrix_flops is that sum.
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


def causal_self_attention(h, c_attn, heads, drop):
    """GPT-2's attention before its output projection: one packed Q/K/V projection split
    three ways, scores scaled by 1/sqrt(head size), a causal mask, Softmax, dropout."""
    b, t, d = h.shape
    q, k, v = c_attn(h).split(d, dim=2)
    hd = d // heads
    q = q.view(b, t, heads, hd).transpose(1, 2)
    k = k.view(b, t, heads, hd).transpose(1, 2)
    v = v.view(b, t, heads, hd).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=h.device))
    att = att.masked_fill(~mask, float("-inf"))
    att = drop(F.softmax(att, dim=-1))
    return (att @ v).transpose(1, 2).reshape(b, t, d)


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
        y = causal_self_attention(self.ln_1(x), self.c_attn, self.heads, self.drop)
        x = x + self.drop(self.c_proj(y))
        x = x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))
        return self.lm_head(self.ln_f(x))


class Block(nn.Module):
    """One GPT-2 transformer block: pre-LN attention and MLP (tanh GELU), residuals."""

    def __init__(self, d, heads, drop):
        super().__init__()
        self.heads = heads
        self.drop = drop
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        y = causal_self_attention(self.ln_1(x), self.c_attn, self.heads, self.drop)
        x = x + self.drop(self.c_proj(y))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class GPT2(nn.Module):
    """GPT-2 as published: `layers` blocks and an output head tied to the token embedding
    (lm_head.weight is wte.weight, one parameter, so model.parameters() counts it once). With
    the defaults, GPT-2 124M: 124,439,808 parameters. flat_head runs the head on the (S, D)
    view of the sequence (head_as_gemm() then writes it as Gemm(transB=1) of the table
    itself); head_bias gives the tied head a bias, which no tied linear has."""

    def __init__(self, vocab=50257, ctx=1024, d=768, heads=12, layers=12, flat_head=False,
                 head_bias=False):
        super().__init__()
        self.flat_head = flat_head
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Block(d, heads, self.drop) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=head_bias)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        b, t = idx.shape
        pos = torch.arange(t, device=idx.device).unsqueeze(0)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if self.flat_head:
            x = x.view(b * t, x.shape[-1])
        return self.lm_head(x)


class SharedLinear(nn.Module):
    """Two projections of one weight (fc2.weight is fc1.weight): sharing that is not a tied
    output head, which the importer must refuse."""

    def __init__(self, vocab=50, d=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)
        self.fc2.weight = self.fc1.weight

    def forward(self, idx):
        return self.fc2(torch.relu(self.fc1(self.wte(idx))))


class UntransposedTable(nn.Module):
    """The embedding table multiplied as it is stored (x·E, E square), not as a tied head
    (x·Eᵀ): sharing the importer must refuse."""

    def __init__(self, vocab=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, vocab)

    def forward(self, idx):
        return torch.relu(self.wte(idx)) @ self.wte.weight


class Signal1d(nn.Module):
    """A 1-D convolutional classifier of 4-channel signals of 128 samples: Conv1d (padded,
    strided, grouped), BatchNorm1d, MaxPool1d, AvgPool1d, a global average and a linear
    classifier, so that each 1-D operator is imported as its 2-D counterpart on a plane of one
    row."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(4, 32, 7, padding=3), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 64, 5, stride=2, padding=2, groups=4), nn.BatchNorm1d(64), nn.ReLU(),
            nn.AvgPool1d(3, stride=2, padding=1), nn.Conv1d(64, 64, 3, bias=False), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1))
        self.classifier = nn.Linear(64, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class TwoTiedHeads(nn.Module):
    """Two output heads multiplying by the transpose of one embedding table: the .net format
    ties one head per embedding, so the importer must refuse the second."""

    def __init__(self, vocab=40, d=16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx)
        return x @ self.wte.weight.t(), self.ln(x) @ self.wte.weight.t()


class Dilated(nn.Module):
    """A dilated convolution, which no conv layer computes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, dilation=2)

    def forward(self, x):
        return torch.relu(self.conv(x))


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


def export(model, example, path, dynamic_axes=None, with_weights=False):
    model.train()
    torch.onnx.export(model, example, path, export_params=with_weights, input_names=["input"],
                      output_names=["output"], opset_version=OPSET,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes=dynamic_axes)


def head_as_gemm(path):
    """Rewrites the tied head of the file at path, MatMul(x, Transpose(wte)), as
    Gemm(x, wte, transB=1): the same product, written as other exporters write a linear layer
    over a 2-D view (PyTorch writes Gemm only for a layer with a bias)."""
    m = onnx.load(path)
    g = m.graph
    head = next(n for n in g.node if n.name == "/lm_head/MatMul")
    trans = next(n for n in g.node if n.output[0] == head.input[1])
    assert trans.op_type == "Transpose" and list(trans.attribute[0].ints) == [1, 0]
    gemm = onnx.helper.make_node("Gemm", [head.input[0], trans.input[0]], list(head.output),
                                 name="/lm_head/Gemm", transB=1)
    nodes = [gemm if n is head else n for n in g.node if n is not trans]
    del g.node[:]
    g.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def one_conv(path, x_shape, w_shape, y_shape, **attrs):
    """A graph of one Conv (and a Relu) written with onnx.helper, for attributes PyTorch does
    not export: TensorFlow's SAME padding of an even input, which pads one side only."""
    h = onnx.helper
    x = h.make_tensor_value_info("input", onnx.TensorProto.FLOAT, x_shape)
    w = h.make_tensor_value_info("conv.weight", onnx.TensorProto.FLOAT, w_shape)
    y = h.make_tensor_value_info("output", onnx.TensorProto.FLOAT, y_shape)
    nodes = [h.make_node("Conv", ["input", "conv.weight"], ["c"], name="/conv/Conv", **attrs),
             h.make_node("Relu", ["c"], ["output"], name="/Relu")]
    m = h.make_model(h.make_graph(nodes, "one_conv", [x, w], [y]),
                     opset_imports=[h.make_opsetid("", OPSET)], producer_name="onnx.helper")
    onnx.checker.check_model(m)
    onnx.save(m, path)


def odd_names(path):
    """A valid graph (Conv, Relu, Gemm) whose node and producer names hold a line break, a
    byte outside ASCII and 3,000 characters: they are copied into the .net's comments, which
    must stay one line of text each."""
    h = onnx.helper
    x = h.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 3, 8, 8])
    w = h.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [4, 3, 3, 3])
    f = h.make_tensor_value_info("f", onnx.TensorProto.FLOAT, [5, 144])
    y = h.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 5])
    nodes = [h.make_node("Conv", ["input", "w"], ["c"], name="conv\nfc injected out=7"),
             h.make_node("Relu", ["c"], ["r"], name="relu\x9b\x00end"),
             h.make_node("Flatten", ["r"], ["flat"], name="flatten"),
             h.make_node("Gemm", ["flat", "f"], ["output"], name="g" * 3000, transB=1)]
    m = h.make_model(h.make_graph(nodes, "odd_names", [x, w, f], [y]),
                     opset_imports=[h.make_opsetid("", OPSET)], producer_name="line\nbreak")
    onnx.save(m, path)


def pytorch_counts(model, example):
    """Parameters (model.parameters(), as PyTorch reports them) and profiler FLOPs of one
    forward pass. The profiler counts no FLOPs for 1-D convolutions (aten::conv1d runs the 2-D
    kernel without calling aten::conv2d): they are added from each Conv1d's output as PyTorch
    computed it, 2 * output elements * (input channels / groups) * kernel size."""
    params = sum(p.numel() for p in model.parameters())
    conv1d = []

    def count(mod, inp, out):
        conv1d.append(2 * out.numel() * (mod.in_channels // mod.groups) * mod.kernel_size[0])

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, nn.Conv1d)]
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        model(example)
    for h in hooks:
        h.remove()
    by_op = {e.key: e.flops for e in prof.key_averages() if e.flops}
    assert not conv1d or "aten::conv1d" not in by_op, "the profiler counts conv1d now"
    if conv1d:
        by_op["Conv1d (from its output)"] = sum(conv1d)
    matrix = sum(v for k, v in by_op.items() if k in MATRIX_OPS or k.startswith("Conv1d"))
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
        ("gpt2_tied", GPT2(), torch.zeros(1, 64, dtype=torch.long)),
        # a small character model whose tied head is a Gemm(transB=1) over the (S, D) view
        ("char_tied_gemm", GPT2(vocab=96, ctx=64, d=64, heads=4, layers=2, flat_head=True),
         torch.zeros(1, 64, dtype=torch.long)),
        ("signal1d", Signal1d(), torch.zeros(1, 4, 128)),
        # exported with its weights (export_params=True): tables and matrices are constants
        ("gpt2_tiny_weights", GPT2(vocab=32, ctx=32, d=16, heads=2, layers=1),
         torch.zeros(1, 16, dtype=torch.long)),
    ]
    rows = []
    for name, model, example in nets:
        export(model, example, os.path.join(out, name + ".onnx"),
               with_weights=name.endswith("_weights"))
        if name == "char_tied_gemm":
            head_as_gemm(os.path.join(out, name + ".onnx"))
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
    export(SharedLinear(), torch.zeros(1, 8, dtype=torch.long),
           os.path.join(out, "bad_shared_weight.onnx"))
    export(UntransposedTable(), torch.zeros(1, 8, dtype=torch.long),
           os.path.join(out, "bad_shared_untransposed.onnx"))
    export(GPT2(vocab=96, ctx=16, d=32, heads=2, layers=1, head_bias=True),
           torch.zeros(1, 16, dtype=torch.long), os.path.join(out, "bad_tied_bias.onnx"))
    export(TwoTiedHeads(), torch.zeros(1, 8, dtype=torch.long),
           os.path.join(out, "bad_tied_twice.onnx"))
    export(Dilated(), torch.zeros(1, 3, 32, 32), os.path.join(out, "bad_dilated_conv.onnx"))
    odd_names(os.path.join(out, "odd_names.onnx"))
    one_conv(os.path.join(out, "bad_asymmetric_pad.onnx"), [1, 3, 32, 32], [8, 3, 3, 3],
             [1, 8, 16, 16], strides=[2, 2], pads=[0, 0, 1, 1])
    one_conv(os.path.join(out, "bad_asymmetric_pad_1d.onnx"), [1, 3, 32], [8, 3, 4], [1, 8, 32],
             auto_pad="SAME_UPPER")
    m = onnx.load(os.path.join(out, "small_dynamic_batch.onnx"))
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 99
    onnx.save(m, os.path.join(out, "bad_opset.onnx"))


if __name__ == "__main__":
    main()
