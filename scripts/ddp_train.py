#!/usr/bin/env python3
"""ddp_train.py MODEL.net BATCH ITERATIONS WARMUP BUCKET_MB: PyTorch DistributedDataParallel
on the CPU, one rank of a job that a launcher started (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT in the environment, as experiments/emucluster.sh sets them; EMU_ADDR, when set,
picks the network interface gloo uses).

Builds the network of a poseidon .net file (scripts/torch_step.py's layer kinds), wraps it in
DDP with the gloo backend and BUCKET_MB buckets, and trains ITERATIONS steps of SGD (momentum
0.9, weight decay 0.0005, as poseidon train's defaults) on synthetic data, BATCH images per
rank, one compute thread. Rank 0 prints one line, "images_per_s X", over the steps after the
WARMUP first: what poseidon train's CSV reports for the same job. Exits 2 without torch.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel
except ImportError:
    print("ddp_train.py: PyTorch is missing: apt-get install -y python3-torch", file=sys.stderr)
    sys.exit(2)
from torch_step import Net, parse_net


def interface_of(addr):
    """The interface holding IPv4 address addr (gloo would otherwise pick the hostname's)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) > 3 and f[3].split("/")[0] == addr:
            return f[1]
    return None


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    path, batch, iters, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    bucket_mb = float(sys.argv[5])
    if os.environ.get("EMU_ADDR"):
        ifname = interface_of(os.environ["EMU_ADDR"])
        if ifname:
            os.environ["GLOO_SOCKET_IFNAME"] = ifname
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    layers = parse_net(path)
    net = DistributedDataParallel(Net(layers), bucket_cap_mb=bucket_mb)
    shape = [int(v) for v in layers[0][1]["shape"].split("x")]
    torch.manual_seed(100 + rank)
    x = torch.randn([batch] + shape)
    y = torch.randint(0, net.module.classes, (batch,))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0005)
    net.train()
    t0 = None
    for i in range(iters):
        if i == warmup:
            dist.barrier()
            t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    dist.barrier()
    secs = time.perf_counter() - t0
    if rank == 0:
        print("images_per_s %.1f" % ((iters - warmup) * batch * world / secs), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
