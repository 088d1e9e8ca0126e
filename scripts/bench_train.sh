#!/usr/bin/env bash
# bench_train.sh BUILD-DIR: training throughput and GEMM efficiency of the CPU runtime.
# Writes out/bench/train.csv with rows
#   bench,model,layer,batch,value,unit
# - train_images_per_s: `poseidon train --data synthetic` on the LeNet-style CNN and
#   cifar10-quick at batch 64 (2 epochs of 1024 samples; the second epoch's rate);
# - gemm_ratio: for each conv/fc layer whose forward is at least 1 MFLOP per sample, the time
#   of the bare sgemm calls of its shapes divided by the layer's time (forward+backward), from
#   `poseidon profile --detail` (medians of 9 repeats; each repeat times the layers and then
#   the bare GEMMs, so both see the same load); 1.0 means the layer runs at bare-sgemm speed
#   (target >= 0.8). The machine is shared: compare ratios within one run, and repeat.
# One BLAS thread (the default of `train` and `profile`) unless OPENBLAS_NUM_THREADS is set.
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p out/bench
out=out/bench/train.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "bench,model,layer,batch,value,unit" > "$out"
for model in lenet cifar10-quick; do
    "$build/poseidon" train --model "models/$model.net" --data synthetic --limit 1024 \
        --batch 64 --epochs 2 --csv "$tmp/$model.csv" > /dev/null
    ips=$(awk -F, 'NR==3 {print $5}' "$tmp/$model.csv")
    echo "train_images_per_s,$model,,64,$ips,images/s" >> "$out"
    "$build/poseidon" profile --model "models/$model.net" --batch 64 --repeats 9 \
        --detail --out "$tmp/$model-profile.csv"
    awk -F, -v m="$model" 'NR > 1 && ($5 == "conv" || $5 == "fc") && $7 / $2 >= 1e6 {
        printf "gemm_ratio,%s,%s,%d,%.3f,ratio\n", m, $1, $2, ($8 + $9) / ($3 + $4) }' \
        "$tmp/$model-profile.csv" >> "$out"
done
cat "$out"
