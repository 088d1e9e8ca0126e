#!/usr/bin/env bash
# char_train.sh [EPOCHS]: the character-level transformer (models/char-transformer.net) on
# the fortune collections of fortunes-min, on one worker and on 4 local workers per scheme,
# the same global batch of 32 and SGD settings. Writes out/char/<run>.out (the per-epoch
# rows) and prints the unigram entropy of the text, the last epoch of each run and text
# the single-worker model writes.
set -eu
cd "$(dirname "$0")/.."
epochs=${1:-10}
bin=build/poseidon
out=out/char
mkdir -p "$out"
common=(--model models/char-transformer.net --data fortunes --epochs "$epochs" --job-out none)
$bin train "${common[@]}" --batch 32 --lr 0.1 --weight-decay 0 --sample 300 \
    >"$out/1worker.out" 2>"$out/1worker.log"
grep -o 'unigram entropy of the text [0-9.]* nats' "$out/1worker.log"
for scheme in ps sfb+wfbp allreduce+wfbp hybrid; do
    $bin train --workers 4 "${common[@]}" --scheme "$scheme" --batch 8 --set lr=0.1 \
        --set weight_decay=0 >"$out/4workers-$scheme.out" 2>"$out/4workers-$scheme.log"
done
echo "run,epoch,loss"
awk -F, 'NR > 1 && /^[0-9]/ {last = $1 "," $2} END {print "1 worker," last}' "$out/1worker.out"
for scheme in ps sfb+wfbp allreduce+wfbp hybrid; do
    awk -F, -v s="$scheme" '/^[0-9.]+,[0-9]+,/ {last = $1 "," $3} END {print "4 workers " s "," last}' \
        "$out/4workers-$scheme.out"
done
sed -n '/characters it writes/,$p' "$out/1worker.out"
