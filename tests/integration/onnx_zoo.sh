#!/usr/bin/env bash
# PyTorch's default (eval-mode) exports of torchvision networks (tests/data/onnx/zoo_*.onnx):
# the imported MobileNetV2 (32x32 input: ReLU6, depthwise convolutions, folded batch norms)
# trains a few steps on one worker with a falling loss and on two workers, `poseidon
# profile` times every layer of the imported EfficientNet-B0 (SiLU, squeeze-and-excitation
# gates), `poseidon sim` runs on the imported ShuffleNetV2 (channel split and shuffle), and
# the small Swin Transformer (winattn, patchmerge) trains on one worker with a falling loss
# and on two.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p="$build/poseidon"
data=tests/data/onnx

for n in mobilenet_v2 efficientnet_b0 shufflenet_v2_x0_5 swin_2stage; do
    "$p" model import $data/zoo_$n.onnx -o "$tmp/$n.net" 2>"$tmp/err" || fail "import $n: $(cat "$tmp/err")"
done

# NAME trains on one worker, one batch of 8 seen 4 times, with a falling loss, and on two
# workers (the plan runs: PS and SFB layers) with rank 0 reporting a finite loss
train=(--data synthetic --synthetic-n 8 --batch 8 --iterations 4 --lr 0.05 --no-probe)
trains() {
    local n=$1
    timeout 120 "$p" train --model "$tmp/$n.net" "${train[@]}" >"$tmp/$n.one" 2>&1 ||
        fail "train $n on one worker: $(tail -3 "$tmp/$n.one")"
    local first last loss
    first=$(awk -F, '$1 == 1 { print $2 }' "$tmp/$n.one")
    last=$(awk -F, '$1 == 4 { print $2 }' "$tmp/$n.one")
    [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' ||
        fail "$n: loss did not fall on one worker ($first -> $last): $(tail -5 "$tmp/$n.one")"
    timeout 120 "$p" train --workers 2 --model "$tmp/$n.net" "${train[@]}" --synthetic-n 16 \
        --csv "$tmp/$n.csv" >"$tmp/$n.two" 2>&1 || fail "train $n on two workers: $(tail -3 "$tmp/$n.two")"
    loss=$(awk -F, 'NR > 1 { l = $3 } END { print l }' "$tmp/$n.csv")
    awk -v l="$loss" 'BEGIN { exit !(l + 0 > 0 && l + 0 < 100) }' ||
        fail "$n on two workers: loss '$loss': $(cat "$tmp/$n.csv")"
}
trains mobilenet_v2
trains swin_2stage  # the Swin Transformer's window attention and patch merging

# profile measures every layer of the imported EfficientNet-B0
timeout 120 "$p" profile --model "$tmp/efficientnet_b0.net" --batch 2 --repeats 1 --warmup 0 \
    --out "$tmp/prof.csv" >"$tmp/prof.out" 2>&1 || fail "profile: $(tail -3 "$tmp/prof.out")"
layers=$("$p" model show "$tmp/efficientnet_b0.net" --csv 2>/dev/null | awk -F, 'NR > 1 && $1 != "total"' | wc -l)
rows=$(awk 'NR > 1' "$tmp/prof.csv" | wc -l)
[ "$rows" -ge $((layers - 1)) ] || fail "profile timed $rows layers of $layers"

# the simulator runs on the imported ShuffleNetV2
cat >"$tmp/s.exp" <<EXP
model = shufflenet_v2_x0_5.net
cluster = $root/experiments/clusters/titanx-40gbe.cluster
scheme = hybrid
batch = 32
iterations = 3
sweep_nodes = 1,4
sweep_gbps = 10
sweep_schemes = hybrid
EXP
"$p" sim "$tmp/s.exp" --csv "$tmp/sim.csv" >"$tmp/sim.out" 2>&1 || fail "sim: $(tail -3 "$tmp/sim.out")"
rows=$(awk -F, 'NR > 1 && $7 > 0' "$tmp/sim.csv" | wc -l)
[ "$rows" -eq 2 ] || fail "expected 2 simulated rows: $(cat "$tmp/sim.csv")"
echo ok
