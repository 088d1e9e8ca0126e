#!/usr/bin/env bash
# bench_sim.sh [BUILD-DIR]: simulator speed and memory against nodes — VGG19, ResNet-152,
# GoogLeNet and Inception-V3, hybrid and ps, 10 and 40 GbE (Titan X cluster), one iteration
# at 8, 64, 256, 1,024 and 10,000 nodes, one core, with the default network model (auto:
# exact per-flow max-min at every size) and, at 1,024 and 10,000 nodes, the grouped model
# too (net_model = whole, broadcasts and gathers kept whole; stopped after
# BENCH_WHOLE_TIMEOUT seconds, default 30). Writes out/bench/sim.csv:
# model,nodes,gbps,scheme,net_model,status,wall_s,events,events_per_s,peak_rss_MB,
# base_rss_MB,sim_rss_MB,cpu_s (net_model: asked:ran; wall_s: the simulation of the
# configuration alone, one iteration; sim_rss_MB = peak RSS minus that of the bare binary,
# whose linked CUDA/BLAS libraries dominate small runs; cpu_s: user + system CPU seconds of
# the whole run, loading and the 1-node baseline included, which a machine busy with other
# jobs inflates far less than wall time), and out/reports/sim-scaling.{png,svg} where
# gnuplot is installed. Targets (one core): 1,024 nodes <= 1 s, 10,000 nodes <= 60 s per
# iteration. A default-model run is stopped after BENCH_TIMEOUT seconds (default 300).
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$build/poseidon
[ -x "$bin" ] || { echo "bench_sim.sh: $bin not built" >&2; exit 1; }
limit=${BENCH_TIMEOUT:-300}
whole_limit=${BENCH_WHOLE_TIMEOUT:-30}
mkdir -p out/bench
out=out/bench/sim.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base_kb=$(/usr/bin/time -f "%M" "$bin" --version 2>&1 > /dev/null | tail -1)
echo "model,nodes,gbps,scheme,net_model,status,wall_s,events,events_per_s,peak_rss_MB,base_rss_MB,sim_rss_MB,cpu_s" > "$out"
# one run: model nodes gbps scheme net_model time-limit; returns 0 when it finished
run() {
    local m=$1 n=$2 g=$3 sc=$4 nm=$5 lim=$6
    local start rc wall events simwall model_used rss cpu status
    start=$(date +%s.%N)
    timeout "$lim" /usr/bin/time -f "%M %U %S" -o "$tmp/rss" taskset -c 0 "$bin" sim \
        "experiments/$m.exp" --set sweep_nodes=$n --set sweep_gbps=$g \
        --set sweep_schemes=$sc --set iterations=1 --set net_model=$nm --csv "$tmp/row.csv" \
        > /dev/null 2> "$tmp/err"
    rc=$?
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    if [ $rc -eq 0 ]; then
        # the row's own wall_s (simulation only, without the 1-node baseline and loading) and
        # the network model that ran (auto resolves to exact or whole)
        read -r events simwall model_used < <(awk -F, 'NR == 2 { print $18, $19, $20 }' "$tmp/row.csv")
        read -r rss cpu < <(tail -1 "$tmp/rss" | awk '{ print $1, $2 + $3 }')
        awk -v m=$m -v n=$n -v g=$g -v sc=$sc -v nm="$nm:$model_used" -v e="$events" \
            -v w="$simwall" -v r="$rss" -v b="$base_kb" -v c="$cpu" 'BEGIN {
            printf "%s,%d,%d,%s,%s,ok,%.3f,%d,%.0f,%.1f,%.1f,%.1f,%.2f\n", m, n, g, sc, nm, w, e,
                   (w > 0 ? e / w : 0), r / 1024, b / 1024, (r - b) / 1024, c }' >> "$out"
    else
        status=$([ $rc -eq 124 ] && echo timeout || echo "error-$rc")
        printf "%s,%d,%d,%s,%s,%s,%.1f,,,,,,\n" $m $n $g $sc $nm $status "$wall" >> "$out"
        [ $rc -ne 124 ] && tail -3 "$tmp/err" >&2
    fi
    tail -1 "$out"
    return $rc
}
for m in vgg19 resnet-152 googlenet inception-v3; do
    for sc in hybrid ps; do
        for g in 10 40; do
            for n in 8 64 256 1024 10000; do run $m $n $g $sc auto "$limit"; done
            # the grouped model, an option: what it saves
            run $m 1024 $g $sc whole "$whole_limit"; run $m 10000 $g $sc whole "$whole_limit"
        done
    done
done
if command -v gnuplot > /dev/null; then
    mkdir -p out/reports
    gnuplot -e "csv='$out'; out='out/reports/sim-scaling'" reports/sim_scaling.gp &&
        echo "plot: out/reports/sim-scaling.png"
fi
exit 0
