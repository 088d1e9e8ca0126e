#!/usr/bin/env bash
# bench_sim.sh [BUILD-DIR]: simulator speed and memory against nodes — VGG19, ResNet-152,
# GoogLeNet and Inception-V3, hybrid and ps, 10 and 40 GbE (Titan X cluster), a warm-up and
# one measured iteration (BENCH_ITERATIONS, default 2) at 8, 64, 256, 1,024 and 10,000
# nodes, one core, with the default network model (auto: exact per-flow max-min at every
# size) and, at 1,024 and 10,000 nodes, the grouped model too (net_model = whole, broadcasts
# and gathers kept whole; stopped after BENCH_WHOLE_TIMEOUT seconds, default 30); ResNet-152
# hybrid at 1,024 nodes also with hybrid_rule = layer; then 100,000 GPUs: 12,544 H100 nodes
# of 8 devices (NVLink 4), 400 Gbit/s NICs, in 392 racks of 32 nodes at oversubscription 2
# and 4, VGG19, ResNet-152 and GPT-2 (experiments/seq-length.exp, batch 8) under hybrid3
# and allreduce+wfbp, stopped after BENCH_100K_TIMEOUT seconds (default 90; the target is
# 60). Writes out/bench/sim.csv:
# model,nodes,gbps,scheme,net_model,status,wall_s,events,events_per_s,peak_rss_MB,
# base_rss_MB,sim_rss_MB,cpu_s,extra (net_model: asked:ran; wall_s: the simulation of the
# configuration alone, every iteration; sim_rss_MB = peak RSS minus that of the bare binary,
# whose linked CUDA/BLAS libraries dominate small runs; cpu_s: user + system CPU seconds of
# the whole run, loading and the 1-node baseline included, which a machine busy with other
# jobs inflates far less than wall time; extra: the run's other --set overrides, - for
# none; a run stopped at its limit has status timeout and wall_s the limit), and
# out/reports/sim-scaling.{png,svg} where gnuplot is installed. Targets (one core): 1,024
# nodes <= 1 s, 10,000 nodes <= 60 s, 100,000 GPUs <= 60 s and 4 GB.
# BENCH_ONLY=100k runs the 100,000-GPU points alone, BENCH_ONLY=grid the rest alone;
# BENCH_100K_SCHEMES (default "hybrid3 allreduce+wfbp") picks the schemes of those points,
# BENCH_100K_MODEL (default auto, exact) their network model (whole: the grouped one).
# A default-model run is stopped after BENCH_TIMEOUT seconds (default 300).
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$build/poseidon
[ -x "$bin" ] || { echo "bench_sim.sh: $bin not built" >&2; exit 1; }
limit=${BENCH_TIMEOUT:-300}
whole_limit=${BENCH_WHOLE_TIMEOUT:-30}
big_limit=${BENCH_100K_TIMEOUT:-90}
iters=${BENCH_ITERATIONS:-2}
only=${BENCH_ONLY:-all}
mkdir -p out/bench
out=out/bench/sim.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base_kb=$(/usr/bin/time -f "%M" "$bin" --version 2>&1 > /dev/null | tail -1)
echo "model,nodes,gbps,scheme,net_model,status,wall_s,events,events_per_s,peak_rss_MB,base_rss_MB,sim_rss_MB,cpu_s,extra" > "$out"
# one run: experiment nodes gbps scheme net_model time-limit [KEY=VALUE...] (more --set);
# returns 0 when it finished
run() {
    local x=$1 n=$2 g=$3 sc=$4 nm=$5 lim=$6
    shift 6
    local start rc wall events simwall model_used rss cpu status m extra="${*:--}" sets=()
    for kv in "$@"; do sets+=(--set "$kv"); done
    rm -f "$tmp/row.csv"
    start=$(date +%s.%N)
    /usr/bin/time -f "%M %U %S" -o "$tmp/rss" timeout "$lim" taskset -c 0 "$bin" sim \
        "experiments/$x.exp" --set sweep_nodes=$n --set sweep_gbps=$g \
        --set sweep_schemes=$sc --set iterations=$iters --set net_model=$nm "${sets[@]}" \
        --csv "$tmp/row.csv" > /dev/null 2> "$tmp/err"
    rc=$?
    m=$x
    [ -s "$tmp/row.csv" ] && m=$(awk -F, 'NR == 2 { print $1 }' "$tmp/row.csv")
    [ "$x" = seq-length ] && m=gpt2
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    read -r rss cpu < <(tail -1 "$tmp/rss" | awk '{ print $1, $2 + $3 }')
    if [ $rc -eq 0 ]; then
        # the row's own wall_s (simulation only, without the 1-node baseline and loading) and
        # the network model that ran (auto resolves to exact or whole)
        read -r events simwall model_used < <(awk -F, 'NR == 2 { print $18, $19, $20 }' "$tmp/row.csv")
        awk -v m=$m -v n=$n -v g=$g -v sc=$sc -v nm="$nm:$model_used" -v e="$events" \
            -v w="$simwall" -v r="$rss" -v b="$base_kb" -v c="$cpu" -v x="$extra" 'BEGIN {
            printf "%s,%d,%d,%s,%s,ok,%.3f,%.0f,%.0f,%.1f,%.1f,%.1f,%.2f,%s\n", m, n, g, sc, nm, w,
                   e, (w > 0 ? e / w : 0), r / 1024, b / 1024, (r - b) / 1024, c, x }' >> "$out"
    else
        status=$([ $rc -eq 124 ] && echo timeout || echo "error-$rc")
        # stopped: the memory and CPU time it had used by then
        awk -v m=$m -v n=$n -v g=$g -v sc=$sc -v nm=$nm -v st=$status -v w="$wall" -v r="$rss" \
            -v b="$base_kb" -v c="$cpu" -v x="$extra" 'BEGIN {
            printf "%s,%d,%d,%s,%s,%s,%.1f,,,%.1f,%.1f,%.1f,%.2f,%s\n", m, n, g, sc, nm, st, w,
                   r / 1024, b / 1024, (r - b) / 1024, c, x }' >> "$out"
        [ $rc -ne 124 ] && tail -3 "$tmp/err" >&2
    fi
    tail -1 "$out"
    return $rc
}
if [ "$only" != 100k ]; then
    for m in vgg19 resnet-152 googlenet inception-v3; do
        for sc in hybrid ps; do
            for g in 10 40; do
                for n in 8 64 256 1024 10000; do run $m $n $g $sc auto "$limit"; done
                # the grouped model, an option: what it saves
                run $m 1024 $g $sc whole "$whole_limit"; run $m 10000 $g $sc whole "$whole_limit"
            done
        done
    done
    # Poseidon's per-layer rule: ResNet-152's FC layer by SFB (the heaviest plan at 1,024)
    for g in 10 40; do run resnet-152 1024 $g hybrid auto "$limit" hybrid_rule=layer; done
fi
# 100,000 GPUs, one at a time (each holds a core, and up to 4 GB)
if [ "$only" != grid ]; then
    for x in vgg19 resnet-152 seq-length; do
        for sc in ${BENCH_100K_SCHEMES:-hybrid3 allreduce+wfbp}; do
            for o in 2 4; do
                run $x 12544 400 $sc "${BENCH_100K_MODEL:-auto}" "$big_limit" cluster.device=h100 \
                    cluster.devices_per_node=8 cluster.interconnect=nvlink4 \
                    cluster.nodes_per_rack=32 cluster.oversubscription=$o
            done
        done
    done
fi
if command -v gnuplot > /dev/null; then
    mkdir -p out/reports
    gnuplot -e "csv='$out'; out='out/reports/sim-scaling'" reports/sim_scaling.gp &&
        echo "plot: out/reports/sim-scaling.png"
fi
exit 0
