#!/usr/bin/env bash
# 4 local workers on Fashion-MNIST reach the single worker's test accuracy: an MLP, one short
# epoch on the first 12800 training samples, the same effective batch (4 x 16 = 64) and
# learning rate; the distributed run must be within 3 points of the single worker (the two
# see the samples in different orders). Exit 77 without the dataset.
set -u
build=${1:-build}
dir=/usr/share/datasets/fashion-mnist
[ -r "$dir/train-images-idx3-ubyte.gz" ] || { echo "skip: $dir missing (apt-get install dataset-fashion-mnist)"; exit 77; }
one=$(timeout 120 "$build/poseidon" train --model models/mlp.net --epochs 1 --batch 64 \
      --limit 12800 --threads 1 2>/dev/null | tail -1 | cut -d, -f4)
[ -n "$one" ] || { echo "FAIL: no result from the single worker"; exit 1; }
out=$(timeout 180 "$build/poseidon" train --workers 4 --model models/mlp.net --scheme hybrid \
      --epochs 1 --batch 16 --limit 12800 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "$out" | tail; echo "FAIL: distributed run exited $rc"; exit 1; }
row=$(echo "$out" | grep -E '^(\[rank 0\] )?1\.000,' | tail -1 | sed 's/^\[rank 0\] //')
four=$(echo "$row" | cut -d, -f5)
[ -n "$four" ] || { echo "$out" | tail; echo "FAIL: no result from the 4 workers"; exit 1; }
echo "single worker: test accuracy $one; 4 workers: $four ($(echo "$row" | cut -d, -f6) images/s)"
awk -v a="$one" -v b="$four" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.03 && b > 0.7) }' \
    || { echo "FAIL: 4 workers $four vs one worker $one (tolerance 0.03)"; exit 1; }
echo ok
