#!/usr/bin/env bash
# send_order = layer and fair train exactly what arrival order trains: 2 local ranks of an MLP under
# ps+wfbp (64 KiB slices of 256 KiB blocks), sfb+wfbp (fc1's 100 KB factor V sliced),
# allreduce+wfbp (the ring's chunks sliced), hybrid (fc1 and fc2 by SFB, fc3 by PS) and
# hybrid3 (fc1 and fc2 by SFB, fc3 by a ring), each rank's sends in one queue per peer, its
# tensors sent by layer (under fair: the PS slices taking turns per connection), print the same loss
# and accuracy rows and end with the same parameters, bit for bit on every rank, as in
# arrival order; the job written by the run keeps the order and the slice, and plans as the
# run did.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$build/poseidon
cat >"$tmp/job.exp" <<EXP
model = $root/models/mlp.net
cluster = $root/experiments/clusters/emu-veth.cluster
scheme = ps+wfbp
batch = 32
iterations = 4
kv_block_mb = 0.25
data = synthetic
synthetic_n = 512
probe = no
EXP
for scheme in sfb+wfbp allreduce+wfbp hybrid hybrid3 ps+wfbp; do # ps+wfbp last: its logs are read below
    for order in arrival layer fair; do
        timeout 120 "$bin" train "$tmp/job.exp" --set scheme=$scheme --set send_order=$order \
            --set slice_bytes=65536 --no-eval --timeout-ms 20000 --job-out "$tmp/$order.exp" \
            --params-out "$tmp/$order.params" >"$tmp/$order.log" 2>&1 ||
            { tail -5 "$tmp/$order.log"; fail "$scheme with send_order = $order exited non-zero"; }
        grep -E '^[0-9.]+,[0-9]+,' "$tmp/$order.log" | cut -d, -f1-4 >"$tmp/$order.rows"
        [ -s "$tmp/$order.rows" ] || fail "no training rows of $scheme with send_order = $order"
        ! grep -q "refused a slice" "$tmp/$order.log" || fail "$scheme: a slice was refused"
    done
    for order in layer fair; do
        diff "$tmp/arrival.rows" "$tmp/$order.rows" || fail "$scheme: send_order = $order trained differently"
    done
    for f in arrival.params.0 layer.params.0 layer.params.1 fair.params.0 fair.params.1; do
        cmp -s "$tmp/arrival.params.1" "$tmp/$f" ||
            fail "$scheme: $f differs from rank 1's parameters in arrival order"
    done
done
grep -q "^send_order = layer$" "$tmp/layer.exp" && grep -q "^slice_bytes = 65536$" "$tmp/layer.exp" ||
    fail "the written job lost the send order"
grep -q "^send_order = fair$" "$tmp/fair.exp" && grep -q "^slice_bytes = 65536$" "$tmp/fair.exp" ||
    fail "the written fair job lost the send order"
! grep -q "^send_order" "$tmp/arrival.exp" || fail "an arrival job names its order"
p1=$("$bin" plan "$tmp/layer.exp" 2>/dev/null | grep -o "plan hash: [0-9a-f]*" | grep -o "[0-9a-f]*$")
p2=$(grep -o "plan hash [0-9a-f]*" "$tmp/layer.log" | head -1 | grep -o "[0-9a-f]*$")
[ -n "$p1" ] && [ "$p1" = "$p2" ] || fail "the written job plans differently ($p1 / $p2)"
echo "ok"
