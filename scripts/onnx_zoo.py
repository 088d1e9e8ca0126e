#!/usr/bin/python3
"""The torchvision zoo through `poseidon model import`: exports each classification network of
Debian's torchvision (python3-torchvision) the way a user does, `torch.onnx.export(model.eval(),
x, path)`, imports it, and compares with counts made from PyTorch:

  params   exact: PyTorch's model.parameters(), less what the exporter's batch-norm folding
           removes (a BatchNorm2d that reads a Conv2d's output becomes that conv's bias: its
           2C scale and shift become C biases, or none when the conv had a bias already);
  FLOPs    exact: 2 per multiply-add of every Conv2d and Linear (and of the four projections
           of each MultiheadAttention, which calls no Linear module), from forward hooks,
           against the imported conv, fc and linear layers' forward FLOPs less their bias
           additions (attention's own products, Q.K^T and the sum of V, are left out);
  sim      `poseidon sim` of the imported network, 4 nodes of the Titan X cluster, batch 32.

Prints one row per network (a network that does not import gets the importer's one line).
Needs /usr/bin/python3 with python3-torch and python3-torchvision (apt-get install); `make
test` never runs it. Usage:

  /usr/bin/python3 scripts/onnx_zoo.py [--size 224] [--opset 14] [--no-params]
                                       [--dynamic-batch] [--only a,b] [build/poseidon]
  /usr/bin/python3 scripts/onnx_zoo.py --fixtures tests/data/onnx

--fixtures writes the small default exports `make test` imports (zoo_*.onnx, without their
weights except zoo_tiny_weights, 32x32 inputs, a spread of opsets and one dynamic batch) and
their counts (zoo_reference.csv), instead of the table.
"""
import argparse
import csv
import io
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import torchvision
from torchvision import models
from torchvision.models.convnext import CNBlockConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# torchvision 0.14's classification builders (torchvision.models.list_models came in 0.15)
NETWORKS = [
    "alexnet", "vgg11", "vgg11_bn", "vgg16", "vgg19_bn",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
    "wide_resnet50_2", "wide_resnet101_2",
    "squeezenet1_0", "squeezenet1_1",
    "densenet121", "densenet161", "densenet169", "densenet201",
    "googlenet", "inception_v3",
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
    "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
    "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
    "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3",
    "efficientnet_b4", "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
    "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l",
    "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf",
    "regnet_x_16gf", "regnet_x_32gf",
    "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf",
    "regnet_y_16gf", "regnet_y_32gf", "regnet_y_128gf",
    "convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
    "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14",
    "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b",
]


def build(name):
    kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    return getattr(models, name)(**kw).eval()


def pytorch_counts(model, x):
    """(parameters of the exported graph, conv+linear FLOPs per sample), from PyTorch."""
    outputs, folded, flops = {}, [], [0]

    def conv_hook(m, inp, out):
        outputs[id(out)] = (m, out)  # the tensor kept alive, so that its id stays its own
        k = m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
        flops[0] += 2 * out[0].numel() * k

    def linear_hook(m, inp, out):
        flops[0] += 2 * out[0].numel() * m.in_features

    def attention_hook(m, inp, out):
        # the Q, K, V and output projections, which F.multi_head_attention_forward computes
        # from the module's tensors, not through nn.Linear modules (so no hook of theirs)
        s = out[0].shape[1] if m.batch_first else out[0].shape[0]  # inputs may be keywords
        flops[0] += 2 * s * 4 * m.embed_dim * m.embed_dim

    def window_hook(m, inp, out):
        # Swin's Q/K/V and output projections (F.linear on the module's tensors) over the
        # plane padded to whole windows; the windows' own products are left out, as above
        h, w, c = inp[0].shape[1:]
        wh, ww = m.window_size
        p = -(-h // wh) * wh * (-(-w // ww) * ww)
        flops[0] += 2 * p * 4 * c * c

    def bn_hook(m, inp, out):
        conv = outputs.get(id(inp[0]))
        if conv is not None and conv[1] is inp[0]:
            folded.append((conv[0], m))

    hooks = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
        elif isinstance(m, torch.nn.MultiheadAttention):
            hooks.append(m.register_forward_hook(attention_hook))
        elif isinstance(m, torch.nn.BatchNorm2d):
            hooks.append(m.register_forward_hook(bn_hook))
        elif type(m).__name__ == "ShiftedWindowAttention":
            hooks.append(m.register_forward_hook(window_hook))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    params = sum(p.numel() for p in model.parameters())
    for conv, bn in folded:  # scale and shift become the conv's bias
        params -= bn.weight.numel() + bn.bias.numel()
        params += 0 if conv.bias is not None else conv.out_channels
    return params, flops[0], len(folded)


def imported_counts(poseidon, net):
    """(parameters, conv+fc+linear FLOPs without bias additions) of an imported .net."""
    out = subprocess.run([poseidon, "model", "show", net, "--csv"], capture_output=True,
                         text=True, check=True).stdout
    params, flops = 0, 0
    with open(net) as f:
        keys = {ln.split()[1]: dict(kv.split("=", 1) for kv in ln.split("#")[0].split()[2:])
                for ln in f if ln.startswith("winattn ")}
    for row in csv.DictReader(io.StringIO(out)):
        if row["layer"] == "total":
            params = int(row["params"])
            continue
        if row["type"] == "winattn":  # its projections: less biases, products and softmax
            k = keys[row["layer"]]
            win, heads, d = int(k["window"]), int(k["heads"]), int(row["output"].split("x")[0])
            p = -(-int(k["h"]) // win) * win * (-(-int(k["w"]) // win) * win)
            n = win * win
            bias = 4 * d if k.get("bias", "1") == "1" else 0
            flops += int(row["fwd_flops"]) - p * bias - 4 * p * n * d - 5 * p * n * heads
            continue
        if row["type"] not in ("conv", "fc", "linear"):
            continue
        dims = [int(d) for d in row["output"].split("x")]
        plane = dims[1] * dims[2] if len(dims) == 3 else 1
        out_c = dims[0]
        p, f = int(row["params"]), int(row["fwd_flops"])
        # forward: 2 per multiply-add (weights x plane), plus one per output with a bias
        bias = 0 if f == 2 * p * plane else out_c
        flops += f - bias * plane
    return params, flops


def simulate(poseidon, net, tmp):
    exp = os.path.join(tmp, "zoo.exp")
    with open(exp, "w") as f:
        f.write(f"model = {net}\ncluster = {ROOT}/experiments/clusters/titanx-40gbe.cluster\n"
                "scheme = hybrid\nbatch = 32\niterations = 3\nsweep_nodes = 4\n"
                "sweep_gbps = 10\nsweep_schemes = hybrid\n")
    out = os.path.join(tmp, "zoo.csv")
    subprocess.run([poseidon, "sim", exp, "--csv", out], capture_output=True, check=True)
    with open(out) as f:
        row = next(csv.DictReader(f))
    return float(row["iter_s"])


def one(name, args, tmp):
    size = max(args.size, 75) if name == "inception_v3" else args.size
    model = build(name)
    x = torch.randn(1, 3, size, size)
    path = os.path.join(tmp, name + ".onnx")
    kw = {}
    if args.opset:
        kw["opset_version"] = args.opset
    if args.no_params:
        kw["export_params"] = False
    if args.dynamic_batch:
        kw.update(input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, x, path, **kw)
        except Exception as e:  # the exporter's own refusal
            return f"| {name} | {size} | - | - | - | - | export fails: {str(e).splitlines()[0][:120]} |"
    ref_p, ref_f, n_folded = pytorch_counts(model, x)
    net = os.path.join(tmp, name + ".net")
    r = subprocess.run([args.poseidon, "model", "import", path, "-o", net], capture_output=True,
                       text=True)
    os.unlink(path)
    if r.returncode:
        why = r.stderr.strip().splitlines()[-1].replace(path + ": ", "")
        return f"| {name} | {size} | {ref_p:,} | - | {ref_f:,} | - | {why} |"
    got_p, got_f = imported_counts(args.poseidon, net)
    iter_s = simulate(args.poseidon, net, tmp)
    ok = "ok" if (got_p, got_f) == (ref_p, ref_f) else "MISMATCH"
    return (f"| {name} | {size} | {ref_p:,} | {got_p:,} | {ref_f:,} | {got_f:,} | {ok}; "
            f"{n_folded} BN folded; sim {iter_s * 1000:.1f} ms/iter |")


class TinyNet(torch.nn.Module):
    """A small untrained CNN exported with its weights: folded batch norms whose zero biases
    the exporter merges by value, ReLU6, a squeeze-and-excitation gate, Hardswish, SiLU."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False),
                                nn.BatchNorm2d(8), nn.Hardswish())
        self.se = torchvision.ops.SqueezeExcitation(8, 4)
        self.pw = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2),
                                  nn.Linear(16, 10))

    def forward(self, x):
        return self.head(self.pw(self.se(self.dw(self.stem(x)))))


class SharedConv(torch.nn.Module):
    """One convolution called twice: a weight truly shared, refused in eval mode too."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(torch.relu(self.conv(x))).flatten(1)


# name, builder, opset (None: the exporter's default), dynamic batch, with weights
FIXTURES = [
    ("resnet18", lambda: build("resnet18"), 11, True, False),
    ("mobilenet_v2", lambda: build("mobilenet_v2"), None, False, False),
    ("mobilenet_v3_small", lambda: build("mobilenet_v3_small"), 13, False, False),
    ("efficientnet_b0", lambda: build("efficientnet_b0"), 17, False, False),
    ("shufflenet_v2_x0_5", lambda: build("shufflenet_v2_x0_5"), 12, False, False),
    ("mnasnet0_5", lambda: build("mnasnet0_5"), 15, False, False),
    # torchvision's DenseNet and ConvNeXt classes cut small (their graphs run to 150 kB):
    # one dense block of 10 layers (a Concat of 10 inputs), two ConvNeXt stages of one block
    ("densenet_block10", lambda: models.DenseNet(8, (10,), 16).eval(), None, False, False),
    ("convnext_2stage", lambda: models.ConvNeXt([CNBlockConfig(16, 32, 1),
                                                 CNBlockConfig(32, None, 1)]).eval(),
     None, False, False),
    ("tiny_weights", lambda: TinyNet().eval(), 16, False, True),
    # torchvision's SwinTransformer cut small, at 40x40: a 10x10 plane padded to windows of 4,
    # a shifted block, a patch merge, a 5x5 plane
    ("swin_2stage", lambda: models.SwinTransformer([4, 4], 16, [2, 1], [2, 4], [4, 4],
                                                   num_classes=10).eval(), None, False, False),
]
SIZES = {"swin_2stage": 40}  # fixtures at another input size than 32x32


# (h, w, window, shift, heads, features) of the winattn cases checked against PyTorch: a
# plane padded to windows and shifted on both axes, a square one, one smaller than a window
SWIN_CASES = [(5, 6, 3, 1, 2, 8), (8, 8, 4, 2, 2, 4), (2, 2, 3, 1, 1, 4)]


def swin_layers(path):
    """torchvision's ShiftedWindowAttention and patch merging on random inputs, for the layer
    test that compares winattn and patchmerge with PyTorch: per case a line of its sizes, then
    lines of the weights (Wqkv, Wproj, table), biases (bqkv, bproj), input and output, each
    (1,h,w,D) row-major; then a patch merge's input (1,3,5,4) and output."""
    from torchvision.models.swin_transformer import ShiftedWindowAttention, _patch_merging_pad

    def line(t):
        return " ".join(f"{v:.9g}" for v in t.flatten().tolist()) + "\n"

    torch.manual_seed(1)
    with open(path, "w") as f:
        f.write(f"# {os.path.basename(__file__)} --fixtures: torch {torch.__version__}, "
                f"torchvision {torchvision.__version__}\n{len(SWIN_CASES)}\n")
        for h, w, win, shift, heads, d in SWIN_CASES:
            m = ShiftedWindowAttention(d, [win, win], [shift, shift], heads).eval()
            with torch.no_grad():
                m.relative_position_bias_table.normal_(0, 1.0)  # trained-size biases
                x = torch.randn(1, h, w, d)
                y = m(x)
            f.write(f"{h} {w} {win} {shift} {heads} {d}\n")
            f.write(line(torch.cat([m.qkv.weight.flatten(), m.proj.weight.flatten(),
                                    m.relative_position_bias_table.flatten()])))
            f.write(line(torch.cat([m.qkv.bias, m.proj.bias])) + line(x) + line(y.detach()))
        x = torch.randn(1, 3, 5, 4)
        f.write(line(x) + line(_patch_merging_pad(x)))


def bad_swin_scale(path):
    """A window attention that scales Q by (C // heads) ** -0.25: refused by name."""
    import inspect
    import torchvision.models.swin_transformer as sw
    src = inspect.getsource(sw.shifted_window_attention).replace("** -0.5", "** -0.25")
    ns = dict(vars(sw))
    exec(src, ns)  # the same function but for the scale, in the module's namespace
    keep = sw.shifted_window_attention
    sw.shifted_window_attention = ns["shifted_window_attention"]
    try:
        nn, Permute = torch.nn, torchvision.ops.misc.Permute

        class Residual(nn.Sequential):
            def forward(self, x):
                return x + super().forward(x)

        model = nn.Sequential(nn.Conv2d(3, 8, 4, 4), Permute([0, 2, 3, 1]),
                              Residual(nn.LayerNorm(8), sw.ShiftedWindowAttention(8, [4, 4],
                                                                                  [0, 0], 2)),
                              Permute([0, 3, 1, 2]), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(8, 4)).eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, torch.randn(1, 3, 16, 16), path, export_params=False)
    finally:
        sw.shifted_window_attention = keep


def fixtures(out):
    swin_layers(os.path.join(out, "zoo_swin_layers.txt"))
    torch.manual_seed(0)
    rows = []
    for name, make, opset, dynamic, weights in FIXTURES:
        model = make()
        size = SIZES.get(name, 32)
        x = torch.randn(1, 3, size, size)
        kw = {"export_params": weights}
        if opset:
            kw["opset_version"] = opset
        if dynamic:
            kw.update(input_names=["x"], dynamic_axes={"x": {0: "batch"}})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, x, os.path.join(out, f"zoo_{name}.onnx"), **kw)
        params, flops, _ = pytorch_counts(model, x)
        rows.append((f"zoo_{name}", f"1x3x{size}x{size}", params, flops))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(SharedConv().eval(), torch.randn(1, 4, 8, 8),
                          os.path.join(out, "bad_zoo_shared_conv.onnx"), export_params=False)
    bad_swin_scale(os.path.join(out, "bad_swin_scale.onnx"))
    with open(os.path.join(out, "zoo_reference.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "input_shape", "params", "matrix_flops"])
        w.writerows(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("poseidon", nargs="?", default=os.path.join(ROOT, "build/poseidon"))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--opset", type=int, default=0, help="0: the exporter's default")
    ap.add_argument("--no-params", action="store_true", help="export_params=False")
    ap.add_argument("--dynamic-batch", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated network names")
    ap.add_argument("--fixtures", metavar="DIR", help="write the test fixtures into DIR")
    args = ap.parse_args()
    if args.fixtures:
        fixtures(args.fixtures)
        return 0
    names = args.only.split(",") if args.only else NETWORKS
    torch.manual_seed(0)
    print(f"# torch {torch.__version__}, torchvision {torchvision.__version__}, input "
          f"{args.size}x{args.size}, opset {args.opset or 'default'}, export_params="
          f"{not args.no_params}, {'dynamic' if args.dynamic_batch else 'static'} batch")
    print("| network | input | PyTorch params (BN folded) | imported | PyTorch conv+linear "
          "FLOPs | imported | result |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = one(name, args, tmp)
            bad += " ok;" not in row
            print(row, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
