#!/usr/bin/env bash
# bench_scaling.sh BUILD-DIR [OUT-DIR]: the runtime's weak scaling on the emulated cluster — GoogLeNet,
# emulated compute (0.3 s per iteration at batch 16), 1, 2, 4, 8 nodes in network namespaces
# with 1 Gbit/s tbf links, schemes hybrid, ps+wfbp, ps, allreduce+wfbp, and allreduce+wfbp
# with 4 MB gradient buckets (scheme column allreduce+wfbp/b4) — and the simulator's
# prediction of the same runs (experiments/validate.sh does both). Writes
# OUT-DIR/scaling.csv (default out/bench): model,nodes,gbps,scheme,images_per_s,speedup,
# predicted_images_per_s,predicted_speedup,host_bound (speedup: throughput over the 1-node
# run of the same scheme; host_bound: validate.sh's flag, the ranks used >= 85% of the
# host's cores, so the host rather than the emulated network set the pace). Needs root
# for the namespaces: without it, says so and exits 0. About 2-4 minutes on 2 cores.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
out=${2:-out/bench}
mkdir -p "$out"
if [ "$(id -u)" != 0 ]; then
    echo "bench_scaling: skipped: needs root (network namespaces for the emulated nodes)"
    exit 0
fi
batch=16 model=googlenet
experiments/validate.sh --build "$build" --out "$out/scaling-runs" --models "$model" \
    --nodes "1 2 4 8" --gbps 1 --schemes "hybrid ps+wfbp ps allreduce+wfbp" \
    --bucket-mb 0 --batch "$batch" || { echo "bench_scaling: some runs failed (see $out/scaling-runs)" >&2; exit 1; }
# all-reduce again with the gradients fused into 4 MB buckets (allreduce+wfbp/b4)
experiments/validate.sh --build "$build" --out "$out/scaling-runs-b4" --models "$model" \
    --nodes "1 2 4 8" --gbps 1 --schemes allreduce+wfbp --bucket-mb 4 \
    --batch "$batch" || { echo "bench_scaling: some runs failed (see $out/scaling-runs-b4)" >&2; exit 1; }
awk -F, -v b="$batch" '
FNR == 1 { f++; next }
{ if (f == 2) $4 = $4 "/b4"
  k++; key[k] = $1 "," $2 "," $3 "," $4; s[k] = $4; hb[k] = $8
  ips[k] = $2 * b / $6; pips[k] = $2 * b / $5
  if ($2 == 1) { base[$4] = ips[k]; pbase[$4] = pips[k] } }
END {
    print "model,nodes,gbps,scheme,images_per_s,speedup,predicted_images_per_s,predicted_speedup,host_bound"
    for (i = 1; i <= k; i++)
        printf "%s,%.2f,%.3f,%.2f,%.3f,%s\n", key[i], ips[i], ips[i] / base[s[i]], pips[i], pips[i] / pbase[s[i]], hb[i]
}' "$out/scaling-runs/validate.csv" "$out/scaling-runs-b4/validate.csv" >"$out/scaling.csv"
column -s, -t "$out/scaling.csv"
echo "wrote $out/scaling.csv"
