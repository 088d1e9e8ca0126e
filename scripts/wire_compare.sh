#!/usr/bin/env bash
# wire_compare.sh BUILD-DIR: images/s of poseidon train with fp32 and with bf16 on the wire,
# for every scheme, on an emulated cluster: NODES (default 4) nodes of experiments/emucluster.sh
# (a network namespace each, RATE links, default 1gbit, fair queue), real CPU compute with one
# BLAS thread per rank, synthetic data, batch 16 per worker, the trusted fabric. For each
# network of NETS (default lenet) and scheme of SCHEMES (default ps+wfbp sfb+wfbp
# allreduce+wfbp hybrid), one run at each wire precision, in turn; images/s over the
# iterations after the first fifth of ITERS (default 60). Prints a row per run and writes
# out/bench/wire_compare.csv (net,scheme,wire,images_per_s,load1: the host's 1-minute load
# average at the end of the run). Needs root (namespaces): exits 77 (skip) without them.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
. tests/integration/lib/common.bash
require_netns
nodes=${NODES:-4}
rate=${RATE:-1gbit}
nets=${NETS:-lenet}
schemes=${SCHEMES:-ps+wfbp sfb+wfbp allreduce+wfbp hybrid}
iters=${ITERS:-60}
warm=$((iters / 5))
batch=16
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p out/bench
csv=out/bench/wire_compare.csv
"$build/poseidon" keygen --ranks "$nodes" -o "$tmp/keys" >/dev/null || fail "keygen"
echo "net,scheme,wire,images_per_s,load1" >"$csv"
for net in $nets; do
    for scheme in $schemes; do
        for wire in fp32 bf16; do
            dir="$tmp/$net-$scheme-$wire"
            mkdir -p "$dir"
            OPENBLAS_NUM_THREADS=1 timeout 900 experiments/emucluster.sh -n "$nodes" -r "$rate" \
                -l "$dir" -- "$build/poseidon" train --keys "$tmp/keys" --trusted-fabric \
                --model "models/$net.net" --scheme "$scheme" --data synthetic --batch $batch \
                --iterations "$iters" --no-eval --no-probe --job-out none \
                --report-every "$warm" --set wire_precision=$wire --csv "$dir/run.csv" \
                >/dev/null 2>&1 || { tail -3 "$dir/rank0.log" >&2; fail "$net $scheme $wire"; }
            # (iterations x batch x nodes) / seconds between the first row at or after the
            # warm-up and the last
            ips=$(awk -F, -v w="$warm" -v b=$batch -v n="$nodes" 'NR > 1 && $2 >= w {
                    if (!s) { s = 1; i0 = $2; t0 = $7 } i1 = $2; t1 = $7 }
                    END { if (s && t1 > t0) printf "%.1f", (i1 - i0) * b * n / (t1 - t0) }' \
                  "$dir/run.csv")
            load=$(cut -d' ' -f1 /proc/loadavg)
            echo "$net,$scheme,$wire,$ips,$load" >>"$csv"
            echo "wire_compare: $net $scheme $wire: $ips images/s (load $load)"
        done
    done
done
