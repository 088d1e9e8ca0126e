#!/usr/bin/env bash
# bench_sim.sh [BUILD-DIR]: simulator speed and memory — VGG19 and ResNet-152, hybrid, one
# iteration at 8, 64, 1,024 and 10,000 nodes (40 GbE Titan X cluster), with the default
# network model (auto: exact per-flow max-min up to 512 nodes, broadcasts and gathers kept
# whole above) and, above 512 nodes, the exact model too. Writes out/bench/sim.csv:
# model,nodes,scheme,net_model,status,wall_s,events,events_per_s,peak_rss_MB,base_rss_MB,
# sim_rss_MB (net_model: asked:ran; sim_rss_MB = peak RSS minus that of the bare binary,
# whose linked CUDA/BLAS libraries dominate small runs). Targets (one core): 1,024 nodes
# <= 1 s, 10,000 nodes <= 60 s. A run is stopped after BENCH_TIMEOUT seconds (default 300)
# and recorded with status timeout.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$build/poseidon
[ -x "$bin" ] || { echo "bench_sim.sh: $bin not built" >&2; exit 1; }
limit=${BENCH_TIMEOUT:-300}
mkdir -p out/bench
out=out/bench/sim.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base_kb=$(/usr/bin/time -f "%M" "$bin" --version 2>&1 > /dev/null | tail -1)
echo "model,nodes,scheme,net_model,status,wall_s,events,events_per_s,peak_rss_MB,base_rss_MB,sim_rss_MB" > "$out"
# one run: model nodes net_model
run() {
    local m=$1 n=$2 nm=$3
    local start rc wall events simwall model_used rss status
    start=$(date +%s.%N)
    timeout "$limit" /usr/bin/time -f "%M" -o "$tmp/rss" taskset -c 0 "$bin" sim \
        "experiments/$m.exp" --set sweep_nodes=$n --set sweep_gbps=40 \
        --set sweep_schemes=hybrid --set iterations=1 --set net_model=$nm --csv "$tmp/row.csv" \
        > /dev/null 2> "$tmp/err"
    rc=$?
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    if [ $rc -eq 0 ]; then
        # the row's own wall_s (simulation only, without the 1-node baseline and loading) and
        # the network model that ran (auto resolves to exact or whole)
        read -r events simwall model_used < <(awk -F, 'NR == 2 { print $18, $19, $20 }' "$tmp/row.csv")
        rss=$(tail -1 "$tmp/rss")
        awk -v m=$m -v n=$n -v nm="$nm:$model_used" -v e="$events" -v w="$simwall" -v r="$rss" \
            -v b="$base_kb" 'BEGIN {
            printf "%s,%d,hybrid,%s,ok,%.3f,%d,%.0f,%.1f,%.1f,%.1f\n", m, n, nm, w, e,
                   (w > 0 ? e / w : 0), r / 1024, b / 1024, (r - b) / 1024 }' >> "$out"
    else
        status=$([ $rc -eq 124 ] && echo timeout || echo "error-$rc")
        printf "%s,%d,hybrid,%s,%s,%.1f,,,,,\n" $m $n $nm $status "$wall" >> "$out"
        [ $rc -ne 124 ] && tail -3 "$tmp/err" >&2
    fi
    tail -1 "$out"
}
for m in vgg19 resnet-152; do
    for n in 8 64 1024 10000; do
        run $m $n auto
        # the exact model where auto chose the whole one: what the speed costs
        if [ $n -gt 512 ]; then run $m $n exact; fi
    done
done
