#!/usr/bin/env bash
# char_wire.sh [EPOCHS] [BUILD]: the character-level transformer (models/char-transformer.net,
# the fortunes of fortunes-min) on 4 local workers per scheme, its gradients, parameters and
# factors crossing at an fp32 and at a bf16 wire (wire_precision), the same global batch of 32
# and SGD settings as scripts/char_train.sh. Prints, per scheme, the training loss of the last
# epoch at each wire and their relative difference, and exits 1 when a difference is over 2%
# (docs/precision.md: a bf16 wire should not change what the model learns). Default 10 epochs.
set -eu
cd "$(dirname "$0")/.."
epochs=${1:-10} build=${2:-build}
bin=$build/poseidon
out=out/char-wire
mkdir -p "$out"
common=(--workers 4 --model models/char-transformer.net --data fortunes --epochs "$epochs"
        --job-out none --batch 8 --set lr=0.1 --set weight_decay=0)
# the training loss of the last epoch's row (epoch,iteration,loss,...)
last_loss() { awk -F, '/^[0-9.]+,[0-9]+,[0-9.]+,/ { l = $3 } END { print l }' "$1"; }
echo "scheme,loss_fp32,loss_bf16,difference"
bad=0
for scheme in ps sfb+wfbp allreduce+wfbp hybrid; do
    for wire in fp32 bf16; do
        "$bin" train "${common[@]}" --scheme "$scheme" --set wire_precision="$wire" \
            >"$out/$scheme-$wire.out" 2>"$out/$scheme-$wire.log" ||
            { echo "char_wire: $scheme at $wire failed (see $out/$scheme-$wire.log)" >&2; exit 2; }
    done
    a=$(last_loss "$out/$scheme-fp32.out") b=$(last_loss "$out/$scheme-bf16.out")
    [ -n "$a" ] && [ -n "$b" ] || { echo "char_wire: no loss row for $scheme in $out" >&2; exit 2; }
    awk -v s="$scheme" -v a="$a" -v b="$b" 'BEGIN { printf "%s,%.4f,%.4f,%+.2f%%\n", s, a, b, (b - a) / a * 100 }'
    awk -v a="$a" -v b="$b" 'BEGIN { d = (b - a) / a; exit !(d > 0.02 || d < -0.02) }' && bad=1
done
exit $bad
