#!/usr/bin/env python3
"""torch_step.py MODEL.net BATCH STEPS WARMUP: PyTorch's time of one training step on the CPU.

Builds the network of a poseidon .net file (the layer kinds of LeNet, CIFAR-10 quick and
AlexNet: input, conv, relu, pool, lrn, fc, dropout, softmax_loss) as torch.nn modules and
times STEPS steps of SGD (forward, cross-entropy, backward, momentum 0.9 and weight decay
0.0005 as poseidon train's defaults) on synthetic data, one thread, after WARMUP untimed
steps. Prints one line: "cpu_ms_per_img WALL_ms_per_img", the process's CPU time (user +
system) and the wall-clock time of the timed steps, each divided by STEPS x BATCH images.
Used by scripts/bench_cpu_torch.sh; exits 2 when torch is missing.
"""
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch_step.py: PyTorch is missing: apt-get install -y python3-torch", file=sys.stderr)
    sys.exit(2)


def parse_net(path):
    """[(kind, {key: value})] of the .net file, comments and blank lines left out."""
    layers = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            kv = dict(tok.split("=", 1) for tok in line[2:] if "=" in tok)
            layers.append((line[0], kv))
    return layers


def pair(kv, key, default):
    return int(kv.get(key, default))


class Net(nn.Module):
    def __init__(self, layers):
        super().__init__()
        c, h, w = (int(v) for v in layers[0][1]["shape"].split("x"))
        mods = []
        flat = None  # features once flattened
        for kind, kv in layers[1:]:
            if kind == "conv":
                k, s, p = pair(kv, "kernel", 1), pair(kv, "stride", 1), pair(kv, "pad", 0)
                o = int(kv["out"])
                mods.append(nn.Conv2d(c, o, k, s, p, groups=pair(kv, "groups", 1)))
                c, h, w = o, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            elif kind == "pool":
                k, s, p = pair(kv, "kernel", 1), pair(kv, "stride", 1), pair(kv, "pad", 0)
                ceil = kv.get("ceil", "0") in ("1", "yes", "true")
                pool = nn.MaxPool2d if kv.get("op", "max") == "max" else nn.AvgPool2d
                mods.append(pool(k, s, p, ceil_mode=ceil))
                rnd = (lambda a, b: -(-a // b)) if ceil else (lambda a, b: a // b)
                h, w = rnd(h + 2 * p - k, s) + 1, rnd(w + 2 * p - k, s) + 1
            elif kind == "relu":
                mods.append(nn.ReLU())
            elif kind == "lrn":
                mods.append(nn.LocalResponseNorm(pair(kv, "size", 5), float(kv.get("alpha", 1e-4)),
                                                 float(kv.get("beta", 0.75)),
                                                 float(kv.get("k", 1.0))))
            elif kind == "dropout":
                mods.append(nn.Dropout(float(kv.get("ratio", 0.5))))
            elif kind == "fc":
                if flat is None:
                    mods.append(nn.Flatten())
                    flat = c * h * w
                mods.append(nn.Linear(flat, int(kv["out"])))
                flat = int(kv["out"])
            elif kind == "softmax_loss":
                pass
            else:
                raise SystemExit("torch_step.py: layer kind %s is not supported" % kind)
        self.body = nn.Sequential(*mods)
        self.classes = flat

    def forward(self, x):
        return self.body(x)


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    path, batch, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    torch.manual_seed(1)
    layers = parse_net(path)
    net = Net(layers)
    shape = [int(v) for v in layers[0][1]["shape"].split("x")]
    x = torch.randn([batch] + shape)
    y = torch.randint(0, net.classes, (batch,))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0005)
    net.train()

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        step()
    c1, w1 = time.process_time(), time.perf_counter()
    n = steps * batch
    print("%.4f %.4f" % ((c1 - c0) * 1e3 / n, (w1 - w0) * 1e3 / n))


if __name__ == "__main__":
    main()
