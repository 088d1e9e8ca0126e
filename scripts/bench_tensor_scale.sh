#!/usr/bin/env bash
# bench_tensor_scale.sh BUILD-DIR: do tensors S times smaller on links S times slower move the
# result? The same configurations run by experiments/validate.sh at tensor_scale 1 and 8,
# both dilated 10 times (so that the host's own costs do not decide either): GoogLeNet and the
# FC-heavy LeNet (97% of its parameters in fc1) on 4 emulated nodes at 1 Gbit/s, each of ps,
# ps+wfbp, hybrid and allreduce+wfbp, the median of REPEAT runs per row (environment, default
# 3). Writes out/bench/tensor_scale.csv: model,nodes,gbps,scheme,predicted_s, then per S the
# measured time, its error against the simulator, host_busy and the largest rank's peak RSS
# (MB), and the change from S = 1 to S = 8 (the target: within 3%). Needs root; skipped (a
# line saying so) otherwise. About 25 minutes on 2 cores with REPEAT=3.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench_tensor_scale.sh: skipped, needs root (network namespaces)"; exit 0; }
mkdir -p out/bench
out=out/bench/tensor_scale.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in 1 8; do
    experiments/validate.sh --build "$build" --out "$tmp/s$s" --models "googlenet lenet" --nodes 4 \
        --gbps 1 --schemes "ps ps+wfbp hybrid allreduce+wfbp" --repeat "${REPEAT:-3}" --dilation 10 \
        --tensor-scale $s >"$tmp/log$s" 2>&1 ||
        { tail -5 "$tmp/log$s"; echo "bench_tensor_scale.sh: S = $s failed" >&2; exit 1; }
done
echo "model,nodes,gbps,scheme,predicted_s,measured_s1_s,error_s1,host_busy_s1,rss_s1_mb,measured_s8_s,error_s8,host_busy_s8,rss_s8_mb,change" >"$out"
# validate_detail.csv: 1 model, 2 nodes, 3 gbps, 4 scheme, 5 predicted, 6 measured, 7 error,
# 13 host_busy, 21 peak_rss_mb
join -t, -j1 <(awk -F, 'NR > 1 { print $1 "|" $2 "|" $3 "|" $4 "," $5 "," $6 "," $7 "," $13 "," $21 }' "$tmp/s1/validate_detail.csv" | sort) \
             <(awk -F, 'NR > 1 { print $1 "|" $2 "|" $3 "|" $4 "," $6 "," $7 "," $13 "," $21 }' "$tmp/s8/validate_detail.csv" | sort) |
    awk -F, -v OFS=, '{ split($1, k, "|"); printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.4f\n",
        k[1], k[2], k[3], k[4], $2, $3, $4, $5, $6, $7, $8, $9, $10, ($7 - $3) / $3 }' >>"$out"
column -s, -t "$out"
awk -F, 'NR > 1 { d = $14 < 0 ? -$14 : $14; n++; if (d > w) w = d; if (d <= 0.03) k++ }
    END { printf "S = 8 against S = 1 over %d rows: worst %.1f%%, %d within 3%%\n", n, 100 * w, k }' "$out"
