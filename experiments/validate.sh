#!/usr/bin/env bash
# validate.sh [--quick] [options]: the simulator checked against the runtime. For every
# (network, nodes, bandwidth, scheme) of a grid, writes one experiment (DIR/sim/MODEL-Gg.exp,
# its sweep the grid's nodes and schemes), runs `poseidon sim` on it, and runs each point
# for real with `poseidon train EXPERIMENT --set sweep_nodes=N --set sweep_schemes=S` (the
# file's compute = emulate: the same per-layer profile) on an emulated cluster
# (experiments/emucluster.sh: one network namespace per node, tc tbf at the bandwidth), and
# compares the time per iteration. Each run writes the job it executed (RUN/job.exp).
#
#   --quick             a small grid (googlenet; 2, 4 nodes; 1 Gbit/s; the 4 schemes), ~2-3 min
#   --models "A B"      networks under models/ (default: googlenet inception-v3 lenet)
#   --nodes "2 4 8"     node counts (default 2 4 8)
#   --gbps "0.5 1"      link rates, Gbit/s (default 0.5 1)
#   --schemes "..."     default: ps ps+wfbp hybrid allreduce+wfbp
#   --iterations T      iterations per run (default 8)
#   --warmup W          the first W of them are not measured (default 3: PS runs take two or
#                       three iterations to settle into their steady pace)
#   --repeat R          runs per configuration; the measured time is their median (default 1)
#   --queue Q           the emulated links' queue, fair or fifo (emucluster.sh -q; default fair)
#   --bucket-mb B       all-reduce fusion buckets of >= B MB (the experiment's
#                       allreduce_bucket_mb; default 4, as all-reduce libraries fuse by
#                       default; 0: one ring per layer, host-bound at 8 nodes on 2 cores)
#   --batch K           per worker (per device with D > 1; default 16)
#   --devices-per-node "1 2"  devices per node, one grid per value (default 1): with D > 1
#                       each emulated node is one rank that runs D device threads and
#                       reduces/broadcasts in memory over an
#                       interconnect of --intra-gbps G (default 32) and --intra-latency-us U
#                       (default 100), the experiment's cluster.intra_* keys: slower than
#                       this host's in-memory copy (~7 GB/s and ~60 us per op, LREDUCE rows
#                       of a GoogLeNet 2 x 2 run), so each local op lasts the plan's time
#   --compute-s S       emulated FWD+BWD time of one iteration (default 0.3)
#   --racks K:X         racks of K nodes behind uplinks at oversubscription X: the
#                       experiment's cluster.nodes_per_rack and cluster.oversubscription, and
#                       for real a bridge per rack behind an uplink of K x rate / X
#                       (emucluster.sh -R K -U); node counts up to K run as one rack
#   --dilation K        time dilation (default 1): each run stands for its cluster made K
#                       times slower - links at rate / K (emucluster.sh -k K), emulated compute
#                       and the runtime's timers K times longer, and every time the run
#                       reports divided by K (the job key time_dilation) - so that what the
#                       host spends per message shrinks K-fold against the emulated time; a
#                       run takes K times as long
#   --dilation auto     per row, the smallest K that keeps the ranks' CPU under a third of
#                       the host's cores, from the simulator's prediction of the row: the
#                       plan's units times the nodes times the host's CPU seconds per unit
#                       and rank (VALIDATE_HOST_S_PER_UNIT, default 0.002: threads, wake-ups
#                       and messages, whatever the bytes), plus the bytes all nodes send per
#                       iteration / S times the host's CPU seconds per MB moved times
#                       (1 + S / 4) (VALIDATE_HOST_S_PER_MB, default 0.004 with --transport
#                       fabric, 0.009 with curve: a 12-node GoogLeNet ps+wfbp run at K = 20
#                       spent 3.6 ms of CPU per MB sent over the trusted fabric and 8.5 ms
#                       encrypted; 12- and 16-node PS runs 7.3-9.3 ms encrypted, all-reduce
#                       4.3), over the predicted iteration time; at
#                       least 2 (a run's start-up storm of connections and the emulated
#                       links' shaping), and at most VALIDATE_MAX_DILATION (default 400)
#   --tensor-scale S    every exchanged tensor S times smaller on links S times slower (the
#                       job key tensor_scale, emucluster.sh -s S; default 1): S times less
#                       memory and host CPU per byte for the same cluster; the simulator
#                       runs the full-size job (docs/validation.md, "Tensors S times smaller")
#   --tensor-scale auto per row, the smallest power of 2 that keeps all ranks' memory under
#                       VALIDATE_MEM_GB (default: half of this host's memory), at about
#                       VALIDATE_RANK_PARAM_COPIES (default 6) times the model's fp32
#                       parameters per rank at S = 1, plus 60 MB, and, up to
#                       VALIDATE_MAX_TENSOR_SCALE (default 8), that makes the host's CPU for
#                       the bytes at most a quarter of its CPU per unit (a larger S then
#                       hardly lowers K); with --dilation auto, K is then chosen on the
#                       bytes / S that the host really moves
#   --transport T       fabric (default): the runs' data sockets authenticated by the job's
#                       keys but not encrypted (poseidon train --trusted-fabric; the emulated
#                       cluster is namespaces of this one host, a fabric no one else sees), so
#                       the host spends less than half the CPU per MB that CURVE costs and K
#                       can be smaller; curve: encrypted, as a job across machines runs
#   --send-order O      the runs' and the simulator's send_order: arrival (default), fair or
#                       layer. Under fair (the paper presets' default) the runtime's PS
#                       messages on one connection take turns, a slice each, the max-min
#                       sharing that the simulator assumes for arrival order too; in arrival
#                       order a connection sends first in, first out, which it does not model
#   --device-model D    emulated compute sleeps the simulator's times for device D (e.g.
#                       titanx-maxwell, the Titan X of the papers) instead of a profile
#                       scaled to --compute-s: the runs stand for the papers' GPUs
#   --paper             the grid at the papers' scale: GoogLeNet, Inception-V3, ResNet-152
#                       and VGG19 on Titan X nodes (batch 32), 8, 16 and 32 nodes, 10 and 40
#                       GbE, ps ps+wfbp sfb+wfbp hybrid hybrid3 allreduce+wfbp, the median
#                       of 3 runs, --dilation auto, --tensor-scale auto, --send-order fair,
#                       10 iterations of which the first 4 are not measured; --estimate says how long it takes
#                       (about 27 hours, 1,647 min, on a 2-core host), --resume runs it in parts
#   --paper-quick       a few rows of it: GoogLeNet and Inception-V3 on 16 and 32 nodes at
#                       10 GbE, ps+wfbp hybrid allreduce+wfbp, one run each (about 25 min)
#   --estimate          print each row's K, S and wall time, and the grid's, and run nothing
#                       (no root needed): the runs' set-up and K x iterations x the
#                       predicted iteration
#   --resume            keep the runs of a row already in --out made with the same K, S,
#                       iterations and job, and run only the repeats it lacks: a grid stopped
#                       part way, or run a part at a time, goes on where it was
#   --set KEY=VALUE     an experiment key for the simulator and the runs alike (repeatable),
#                       e.g. --set send_order=layer --set kv_block_mb=0
#   --out DIR           default out/validate
#   --build DIR         where poseidon is (default build)
#
# Writes DIR/validate.csv (model,nodes,gbps,scheme,predicted_s,measured_s,error,host_bound,
# devices,dilation,tensor_scale with error = (predicted - measured) / measured), DIR/validate_detail.csv (plus the CPU
# seconds of all ranks per steady-state iteration, that CPU as a fraction of the host's cores,
# the sim's MB per node, the runs' wall seconds, host_busy, the runs counted, the fastest
# and slowest of them, same_plan, devices, dilation, tensor_scale and the largest peak
# resident memory of a rank, MB; same_plan: 1 when every run's rank 0 logged, layer by layer, the
# sync methods of `poseidon plan` for the point - a `hybrid` that chose otherwise (it builds
# its plan from the cluster file, --no-probe, as the simulator does) would compare two
# different plans), DIR/validate.png and .svg (reports/validate.gp), and prints the
# median and worst |error| over all rows and over the rows that are not host-bound.
# Steady-state CPU: each rank logs the CPU seconds of its process (all threads) from the
# start of iteration 1 to its end (runtime/exec/worker_exec.c), so start-up and the warm-up iteration
# are not in it. host_busy: the fraction of the host's cores busy over the same window
# (all processes and the kernel's network work: /proc/stat sampled every 0.2 s through the
# run, the window ending when the first rank ended): other work on a shared host shows
# here, and so does the kernel's part of the emulated network, which the ranks' CPU does
# not count. host_bound = 1 when the ranks used >= 85% of the host's
# cores over the steady-state iterations or the host was >= 85% busy: then the host, not
# the emulated network or compute, sets the pace (wake-ups wait for a core), which the
# simulator does not model; such rows are kept and marked. Both sides define the
# iteration time the same way: (end of iteration T-1 - end of iteration W-1) / (T - W), where
# an iteration ends with the last op of it on any node (sim/sim.c, experiment key warmup;
# the runtime's merged trace). With --repeat R the row's measured time is the median run's (the lower middle
# one for even R), which keeps one run slowed by other work on the host from deciding the
# row. Needs root (network namespaces); the runs' namespaces are removed by
# emucluster.sh, also on failure or Ctrl-C. Ranks run at nice -10 so that other work on the
# host delays their wake-ups less.
# With --repeat R > 1 it also prints the spread of the runs of one configuration, (slowest -
# fastest) / measured time, median and worst over the grid: the measurement's own noise.
#   HOST_BOUND_FRAC (environment, default 0.85) moves the host_bound threshold.
set -u
# The whole script is one block, read before it runs: a grid takes most of an hour, and bash
# reads a plain script as it goes, so an edit of this file during a run would change it.
{
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
quick=0 models="googlenet inception-v3 lenet" nodes="2 4 8" gbps="0.5 1"
schemes="ps ps+wfbp hybrid allreduce+wfbp" iters=8 warmup=3 batch=16 compute_s=0.3 out=out/validate
repeat=1 queue=fair bucket_mb=4 devices_list=1 intra_gbps=32 intra_lat_us=100 dilation=1 tscale=1 racks=""
build=build device_model="" transport=fabric extra_keys=() estimate=0 resume=0 send_order=arrival
paper() { # paper FULL: the papers' scale; options after it still apply
    models="googlenet inception-v3" nodes="16 32" gbps="10" schemes="ps+wfbp hybrid allreduce+wfbp"
    # PS rows settle after about 4 iterations (GoogLeNet ps+wfbp, 16 nodes: 0.164 s over
    # iterations 2-4, 0.144-0.149 s over 4-13, 0.151 s predicted)
    device_model=titanx-maxwell batch=32 dilation=auto tscale=auto iters=10 warmup=4 send_order=fair
    [ "$1" = 1 ] || return 0
    models="googlenet inception-v3 resnet-152 vgg19" nodes="8 16 32" gbps="10 40" repeat=3
    schemes="ps ps+wfbp sfb+wfbp hybrid hybrid3 allreduce+wfbp"
}
usage() { sed -n '2,/^set -u$/{/^set -u$/!p}' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
    --quick) quick=1; shift; continue ;;
    --estimate) estimate=1; shift; continue ;;
    --resume) resume=1; shift; continue ;;
    --paper) paper 1; shift; continue ;;
    --paper-quick) paper 0; shift; continue ;;
    -h|--help) usage; exit 0 ;;
    esac
    [ $# -ge 2 ] || { echo "validate: $1 needs a value" >&2; exit 2; }
    case $1 in
    --models) models=$2 ;; --nodes) nodes=$2 ;; --gbps) gbps=$2 ;; --schemes) schemes=$2 ;;
    --iterations) iters=$2 ;; --warmup) warmup=$2 ;; --batch) batch=$2 ;; --compute-s) compute_s=$2 ;;
    --repeat) repeat=$2 ;; --queue) queue=$2 ;; --bucket-mb) bucket_mb=$2 ;; --dilation) dilation=$2 ;; --racks) racks=$2 ;; --tensor-scale) tscale=$2 ;;
    --devices-per-node) devices_list=$2 ;; --intra-gbps) intra_gbps=$2 ;; --intra-latency-us) intra_lat_us=$2 ;;
    --set) case $2 in *=*) extra_keys+=("${2%%=*} = ${2#*=}") ;;
           *) echo "validate: --set expects KEY=VALUE, got '$2'" >&2; exit 2 ;; esac ;;
    --out) out=$2 ;; --build) build=$2 ;; --device-model) device_model=$2 ;; --transport) transport=$2 ;;
    --send-order) send_order=$2 ;;
    *) echo "validate: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
    shift 2
done
if [ $quick = 1 ]; then models="googlenet" nodes="2 4" gbps="1"; fi
[ "$(id -u)" = 0 ] || [ "$estimate" = 1 ] || { echo "validate: needs root (one network namespace per emulated node); run it as root: sudo $0 $*" >&2; exit 2; }
[ -x "$build/poseidon" ] || { echo "validate: $build/poseidon not built (make all)" >&2; exit 2; }
[ "$warmup" -ge 1 ] 2>/dev/null || { echo "validate: --warmup must be >= 1" >&2; exit 2; }
[ "$iters" -ge $((warmup + 2)) ] 2>/dev/null ||
    { echo "validate: --iterations must be >= --warmup + 2 (two measured iterations at least)" >&2; exit 2; }
[ "$repeat" -ge 1 ] 2>/dev/null || { echo "validate: --repeat must be >= 1" >&2; exit 2; }
[[ "$dilation" =~ ^([1-9][0-9]{0,3}|auto)$ ]] || { echo "validate: --dilation must be an integer 1..9999 or auto" >&2; exit 2; }
[[ "$tscale" =~ ^([1-9][0-9]{0,3}|auto)$ ]] || { echo "validate: --tensor-scale must be an integer 1..4096 or auto" >&2; exit 2; }
per_rack=0 oversub=1
if [ -n "$racks" ]; then
    [[ "$racks" =~ ^([1-9][0-9]*):([0-9]+([.][0-9]+)?)$ ]] ||
        { echo "validate: --racks expects K:X (nodes per rack : oversubscription), got '$racks'" >&2; exit 2; }
    per_rack=${BASH_REMATCH[1]} oversub=${BASH_REMATCH[2]}
    for n in $nodes; do
        [ "$n" -le "$per_rack" ] || [ $((n % per_rack)) -eq 0 ] ||
            { echo "validate: --racks $racks: $n nodes are not whole racks of $per_rack" >&2; exit 2; }
    done
fi
for devices in $devices_list; do
    [ "$devices" -ge 1 ] 2>/dev/null || { echo "validate: --devices-per-node must list counts >= 1" >&2; exit 2; }
done
case $queue in fair|fifo) ;; *) echo "validate: --queue must be fair or fifo" >&2; exit 2 ;; esac
case $send_order in arrival|fair|layer) ;; *) echo "validate: --send-order must be arrival, fair or layer" >&2; exit 2 ;; esac
# the send order is a job key: --set send_order=... wins over --send-order
case " ${extra_keys[*]-} " in *" send_order = "*) ;; *) [ "$send_order" = arrival ] || extra_keys+=("send_order = $send_order") ;; esac
case $transport in
fabric) transport_flag=--trusted-fabric host_s_per_mb=${VALIDATE_HOST_S_PER_MB:-0.004} ;;
curve) transport_flag="" host_s_per_mb=${VALIDATE_HOST_S_PER_MB:-0.009} ;;
*) echo "validate: --transport must be fabric or curve" >&2; exit 2 ;;
esac
# The host's CPU per iteration of a row, seconds: host_s_per_mb x (1 + S / 4) for every MB
# that the ranks really move (the simulator's MB per node / S, times the nodes), and
# host_s_per_unit for every plan unit (layer or group) of every rank, whatever its bytes: its
# ops' threads, wake-ups, messages and their packets through the emulated links. GoogLeNet
# (58 units) on 32 nodes at S = 16, where the bytes are a small part, spent 3.2 s per
# iteration under allreduce+wfbp at K = 40 and 5.0-6.2 s under ps+wfbp at K = 15: 1.5-2.6 ms
# per unit and rank. A MB costs more on slower links (each connection's share of a link S x K
# times slower than the cluster's, so TCP sends it in smaller pieces): 3.6-5.6 ms at S = 1
# (GoogLeNet and Inception-V3, 16 and 32 nodes), 3-20 ms at S = 8-16 (published_real.sh's
# rows at 8-32 nodes, after the part per unit), hence the factor.
host_s_per_unit=${VALIDATE_HOST_S_PER_UNIT:-0.002}
row_cpu_s() { # row_cpu_s MB_PER_NODE NODES S UNITS
    awk -v mb="$1" -v n="$2" -v S="$3" -v u="$4" -v c="$host_s_per_mb" -v f="$host_s_per_unit" \
        'BEGIN { printf "%.4f\n", n * (mb / S * c * (1 + S / 4) + u * f) }'
}
# auto_scale PARAM_MB NODES MB_PER_NODE UNITS: --tensor-scale auto, a power of 2: at least
# what keeps all ranks' memory under VALIDATE_MEM_GB, and, up to VALIDATE_MAX_TENSOR_SCALE
# (default 8: past it a MB's cost grows about as fast as S shrinks the MBs, row_cpu_s),
# enough that the host's CPU for the bytes is at most a quarter of its CPU per unit
auto_scale() {
    awk -v p="$1" -v n="$2" -v mb="$3" -v u="$4" -v c="${VALIDATE_RANK_PARAM_COPIES:-6}" \
        -v g="${VALIDATE_MEM_GB:-$(awk '/^MemTotal:/ { print $2 / 2 / 1e6 }' /proc/meminfo)}" \
        -v cm="$host_s_per_mb" -v f="$host_s_per_unit" -v hi="${VALIDATE_MAX_TENSOR_SCALE:-8}" 'BEGIN {
        s = 1; while (s < 4096 && n * (60 + c * p / s) > g * 1000) s *= 2
        while (s < hi && mb / s * cm * (1 + s / 4) > u * f / 4) s *= 2
        print s }'
}
# auto_dilation CPU_S PREDICTED_S: --dilation auto, the smallest K that keeps the row's CPU
# per iteration under a third of the host's cores over the K x predicted seconds it lasts; at
# least 2 (a run's start-up storm of connections and the emulated links' shaping), at most
# VALIDATE_MAX_DILATION (default 400)
auto_dilation() {
    awk -v cpu="$1" -v t="$2" -v P="$cores" -v hi="${VALIDATE_MAX_DILATION:-400}" 'BEGIN {
        k = (t > 0) ? cpu / (t * P / 3) : hi; k = int(k) + (k > int(k))
        print (k < 2 ? 2 : (k > hi ? hi : k)) }'
}
# the wall seconds a run of a row takes here: the emulated cluster's set-up and removal
# (1.4, 3.2 and 17 s at 8, 16 and 32 hosts: its tc classes grow as the square of the hosts),
# the ranks' start and end, and the iterations at K x the predicted time
run_wall_s() { # run_wall_s NODES K PREDICTED_S
    awk -v n="$1" -v k="$2" -v t="$3" -v T="$iters" 'BEGIN { printf "%.0f\n", 2.5 + 0.016 * n * n + k * T * t }'
}
# busy and total CPU ticks of the whole host (all processes, the kernel's network work too)
cpu_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat; }

mkdir -p "$out"/profiles "$out"/clusters "$out"/sim "$out"/runs
# a private copy: `make` by others may relink build/poseidon while the grid runs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$build/poseidon" "$tmp/poseidon"
bin=$tmp/poseidon
"$bin" --help >/dev/null 2>&1 || true

csv=$out/validate.csv detail=$out/validate_detail.csv
echo "model,nodes,gbps,scheme,predicted_s,measured_s,error,host_bound,devices,dilation,tensor_scale" >"$csv"
echo "model,nodes,gbps,scheme,predicted_s,measured_s,error,host_bound,cpu_s_per_iter,host_cpu_frac,sim_sent_MB_per_node,wall_s,host_busy,runs,measured_min_s,measured_max_s,same_plan,devices,dilation,tensor_scale,peak_rss_mb" >"$detail"
cores=$(nproc) bound_frac=${HOST_BOUND_FRAC:-0.85}
n_runs=0 n_failed=0 est_total=0
t_start=$(date +%s)
# progress on a terminal only: "[run k of N] point, elapsed, time left at the pace so far"
n_total=$(( $(echo $models | wc -w) * $(echo $devices_list | wc -w) * $(echo $gbps | wc -w) * $(echo $nodes | wc -w) * $(echo $schemes | wc -w) * repeat ))
say() { [ -t 2 ] && printf '\r\033[K' >&2; echo "$@" >&2; } # a line of its own under the progress
progress() {
    [ -t 2 ] || return 0
    local done=$1 el=$(( $(date +%s) - t_start )) left=""
    [ "$done" -gt 0 ] && left=", about $(( el * (n_total - done) / done / 60 )) min left"
    printf '\rvalidate: run %d of %d: %s (%d min%s)\033[K' $((done + 1)) "$n_total" "$2" $((el / 60)) "$left" >&2
}
for model in $models; do
    net=$root/models/$model.net
    [ -f "$net" ] || { echo "validate: no $net" >&2; exit 2; }
    prof=$out/profiles/$model-b$batch.csv
    # the model's fp32 parameters, MB (poseidon model show), for --tensor-scale auto
    param_mb=$("$bin" model show "$net" 2>/dev/null | awk '/^parameters:/ { gsub(/,/, "", $2); print $2 * 4 / 1e6; exit }')
    if [ -z "$device_model" ]; then
        experiments/validate_profile.sh "$bin" "$net" "$batch" "$compute_s" >"$prof" || exit 1
    fi
    for devices in $devices_list; do
        for g in $gbps; do
            cl=$out/clusters/emu-veth-${g}g.cluster
            sed -e "s/^nic_gbps = .*/nic_gbps = $g/" \
                -e "${device_model:+s/^device = .*/device = $device_model/}" experiments/clusters/emu-veth.cluster >"$cl"
            dtag=""; [ "$devices" -gt 1 ] && dtag=-d$devices
            exp=$out/sim/$model-${g}g$dtag.exp
            {
                echo "model = $net"
                echo "cluster = $(cd "$(dirname "$cl")" && pwd)/$(basename "$cl")"
                [ -n "$device_model" ] || echo "profile = $(cd "$(dirname "$prof")" && pwd)/$(basename "$prof")"
                echo "batch = $batch"
                echo "iterations = $iters"
                echo "warmup = $warmup"
                echo "kv_block_mb = 4"
                echo "allreduce_bucket_mb = $bucket_mb"
                if [ "$per_rack" -gt 0 ]; then
                    echo "cluster.nodes_per_rack = $per_rack"
                    echo "cluster.oversubscription = $oversub"
                fi
                if [ "$devices" -gt 1 ]; then # a node of D devices: threads of its one rank
                    echo "cluster.devices_per_node = $devices"
                    echo "cluster.intra_gbps = $intra_gbps"
                    echo "cluster.intra_latency_us = $intra_lat_us"
                fi
                echo "sweep_nodes = $(echo $nodes | tr ' ' ,)"
                echo "sweep_gbps = $g"
                echo "sweep_schemes = $(echo $schemes | tr ' ' ,)"
                # the real runs' keys (the simulator ignores them): each run is this file with
                # one (nodes, scheme) of the sweep
                echo "compute = emulate"
                echo "data = synthetic"
                echo "synthetic_n = 4096"
                echo "probe = no"
                for kv in ${extra_keys[@]+"${extra_keys[@]}"}; do echo "$kv"; done
            } >"$exp"
            simcsv=$out/sim/$model-${g}g$dtag.csv
            "$bin" sim "$exp" --csv "$simcsv" >/dev/null 2>"$out/sim/$model-${g}g$dtag.log" ||
                { echo "validate: poseidon sim $exp failed:" >&2; tail -5 "$out/sim/$model-${g}g$dtag.log" >&2; exit 1; }
            rate="$(awk -v g="$g" 'BEGIN { printf "%dmbit", g * 1000 + 0.5 }')"
            for n in $nodes; do
                for s in $schemes; do
                    tag=$model-n$n$dtag-${g}g-$s
                    run=$out/runs/$tag
                    pred=$(awk -F, -v n="$n" -v s="$s" 'NR > 1 && $2 == n && $4 == s { print $7; exit }' "$simcsv")
                    sent=$(awk -F, -v n="$n" -v s="$s" 'NR > 1 && $2 == n && $4 == s { print $10; exit }' "$simcsv")
                    # the simulator's per-layer methods, to check that the runtime ran the same plan
                    plan_sim=$("$bin" plan "$exp" --csv --set sweep_nodes="$n" --set sweep_schemes="$s" 2>/dev/null |
                        awk -F, '$1 ~ /^[0-9]+$/ { print $1, $5 }')
                    units=$(printf '%s\n' "$plan_sim" | grep -c .)
                    s_row=$tscale k_row=$dilation
                    [ "$tscale" = auto ] && s_row=$(auto_scale "$param_mb" "$n" "$sent" "$units")
                    [ "$dilation" = auto ] && k_row=$(auto_dilation "$(row_cpu_s "$sent" "$n" "$s_row" "$units")" "$pred")
                    if [ "$estimate" = 1 ]; then
                        est=$(( $(run_wall_s "$n" "$k_row" "$pred") * repeat ))
                        est_total=$((est_total + est))
                        printf "%-14s %d nodes%s %4s Gbit/s %-15s predicted %.3f s, %d units: K %s, S %s, about %d s\n" \
                            "$model" "$n" "$([ "$devices" -gt 1 ] && echo " x $devices")" "$g" "$s" "$pred" "$units" "$k_row" "$s_row" "$est"
                        continue
                    fi
                    # --resume: a row whose runs were made with these settings keeps them and
                    # runs only what it lacks
                    settings="K $k_row S $s_row iterations $iters warmup $warmup job $(grep -v '^sweep_' "$exp" | cksum | cut -d' ' -f1)"
                    have=0
                    if [ "$resume" = 1 ] && [ "$(cat "$run/settings" 2>/dev/null)" = "$settings" ] && [ -f "$run/runs.txt" ]; then
                        have=$(grep -c . "$run/runs.txt")
                    else
                        rm -rf "$run"; mkdir -p "$run"
                        echo "$settings" >"$run/settings"
                        : >"$run/runs.txt"
                    fi
                    printf '%s\n' "$plan_sim" >"$run/plan_sim.txt"
                    # racks for real: an uplink of K x rate / X per rack, when there are two
                    emu_racks=()
                    [ "$per_rack" -gt 0 ] && [ "$n" -gt "$per_rack" ] &&
                        emu_racks=(-R "$per_rack" -U "$(awk -v k="$per_rack" -v g="$g" -v x="$oversub" \
                            'BEGIN { printf "%dmbit", k * g * 1000 / x + 0.5 }')")
                    # one line per run of the point: measured cpu frac host_busy wall same_plan
                    for k in $(seq $((have + 1)) "$repeat"); do
                        rd=$run; [ "$repeat" -gt 1 ] && rd=$run/r$k
                        mkdir -p "$rd"
                        progress "$n_runs" "$tag${k:+ #$k}"
                        t0=$(date +%s.%N)
                        # the host's CPU ticks, sampled through the run; each rank notes when it ended
                        (while :; do echo "$(date +%s.%N) $(cpu_ticks)"; sleep 0.2; done) >"$rd/host_cpu.txt" &
                        sampler=$!
                        "$bin" keygen --ranks "$n" -o "$rd/keys" >/dev/null || exit 1
                        timeout $((600 * k_row)) experiments/emucluster.sh -n "$n" -r "$rate" -q "$queue" -k "$k_row" -s "$s_row" "${emu_racks[@]}" -l "$rd/logs" -- \
                            sh -c '"$@"; rc=$?; date +%s.%N >"$0.$RANK"; exit $rc' "$rd/logs/end" \
                            nice -n -10 "$bin" train "$exp" --set sweep_nodes="$n" --set sweep_schemes="$s" \
                            --set time_dilation="$k_row" --set tensor_scale="$s_row" --no-eval --timeout-ms 60000 --trace "$rd/trace" --job-out "$rd/job.exp" --keys "$rd/keys" $transport_flag \
                            >"$rd/out.log" 2>&1
                        rc=$?
                        kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
                        wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
                        n_runs=$((n_runs + 1))
                        meas=""
                        [ $rc = 0 ] && meas=$(awk -F, -v T="$iters" -v W="$warmup" 'NR > 1 && $8 > e[$2] { e[$2] = $8 }
                            END { if (((W - 1) in e) && ((T - 1) in e)) printf "%.6f", (e[T - 1] - e[W - 1]) / (T - W) / 1e9 }' "$rd/trace.csv")
                        rm -f "$rd"/trace-rank*.json "$rd"/trace-rank*.csv
                        if [ -z "$meas" ] || [ -z "$pred" ]; then
                            n_failed=$((n_failed + 1))
                            say "validate: $tag: no result (exit $rc; see $rd/out.log)"
                            tail -3 "$rd/out.log" >&2
                            continue
                        fi
                        # the ranks' steady-state CPU (runtime/exec/worker_exec.c logs "steady_cpu_s C wall_s W
                        # iterations K"): per iteration, and as a fraction of the host's cores over
                        # the ranks' mean window
                        read -r cpu frac < <(cat "$rd"/logs/rank*.log | awk -v P="$cores" '
                            { for (i = 1; i + 5 <= NF; i++) if ($i == "steady_cpu_s" && $(i + 2) == "wall_s") {
                                c += $(i + 1); w += $(i + 3); k = $(i + 5); r++ } }
                            END { if (r && k && w > 0) printf "%.3f %.3f\n", c / k, c / (w / r) / P; else print "nan nan" }')
                        # rank 0 logs "  unit U LAYER METHOD" for the plan it built (runtime/exec/worker.c)
                        grep -E "^  unit [0-9]+ " "$rd/logs/rank0.log" | awk '{ print $2, $NF }' >"$rd/plan_run.txt"
                        same=1
                        if ! cmp -s "$run/plan_sim.txt" "$rd/plan_run.txt"; then
                            same=0
                            say "validate: $tag: the runtime's plan differs from the simulator's (layers: diff $run/plan_sim.txt $rd/plan_run.txt)"
                        fi
                        # host_busy over the ranks' steady-state window: the wall_s they logged, up
                        # to the first rank's end (the samples nearest to both ends)
                        w=$(cat "$rd"/logs/rank*.log | awk '{ for (i = 1; i + 1 <= NF; i++) if ($i == "wall_s") { s += $(i + 1); k++ } }
                            END { if (k) printf "%.3f", s / k }')
                        te=$(cat "$rd"/logs/end.* 2>/dev/null | sort -g | head -1)
                        busy=$(awk -v w="$w" -v te="$te" '
                            { t[NR] = $1; b[NR] = $2; a[NR] = $3 }
                            END { if (w == "" || te == "" || NR < 2) { print "nan"; exit }
                                  i = 1; j = NR
                                  for (k = 1; k <= NR; k++) {
                                      if ((t[k] - (te - w)) ^ 2 < (t[i] - (te - w)) ^ 2) i = k
                                      if ((t[k] - te) ^ 2 < (t[j] - te) ^ 2) j = k }
                                  if (j <= i) { print "nan"; exit }
                                  printf "%.3f", (b[j] - b[i]) / (a[j] - a[i]) }' "$rd/host_cpu.txt")
                        # the largest rank's peak resident memory, MB (each logs peak_rss_mb)
                        rss=$(cat "$rd"/logs/rank*.log | awk '{ for (i = 1; i < NF; i++) if ($i == "peak_rss_mb" && $(i + 1) > m) m = $(i + 1) }
                            END { print m + 0 }')
                        echo "$meas $cpu $frac $busy $wall $same $rss" >>"$run/runs.txt"
                    done
                    [ -s "$run/runs.txt" ] || continue
                    # the point: the median run's time (the lower middle one of an even count);
                    # CPU and host load averaged over the runs, their wall times summed
                    read -r meas mmin mmax cpu frac busy wall nok same rss < <(sort -g "$run/runs.txt" | awk '
                        BEGIN { same = 1 }
                        { m[NR] = $1; c += $2; f += $3; h += $4; w += $5; if ($6 != 1) same = 0; if ($7 > r) r = $7 }
                        END { printf "%s %s %s %.3f %.3f %.3f %.1f %d %d %d\n", m[int((NR + 1) / 2)], m[1], m[NR],
                              c / NR, f / NR, h / NR, w, NR, same, r }')
                    bound=$(awk -v f="$frac" -v h="$busy" -v b="$bound_frac" 'BEGIN { print ((f != "nan" && f + 0 >= b) || (h != "nan" && h + 0 >= b)) ? 1 : 0 }')
                    err=$(awk -v p="$pred" -v m="$meas" 'BEGIN { printf "%.4f", (p - m) / m }')
                    echo "$model,$n,$g,$s,$pred,$meas,$err,$bound,$devices,$k_row,$s_row" >>"$csv"
                    echo "$model,$n,$g,$s,$pred,$meas,$err,$bound,$cpu,$frac,$sent,$wall,$busy,$nok,$mmin,$mmax,$same,$devices,$k_row,$s_row,$rss" >>"$detail"
                    spread=""
                    [ "$nok" -gt 1 ] && spread=$(printf ", %d runs %.3f-%.3f s" "$nok" "$mmin" "$mmax")
                    printf "%-14s %d nodes%s %4s Gbit/s %-15s predicted %.3f s measured %.3f s error %+6.1f%%  (K %s, S %s, cpu %s s/iter, %s of %d cores, host %s busy%s%s, %ss)\n" \
                        "$model" "$n" "$([ "$devices" -gt 1 ] && echo " x $devices")" "$g" "$s" "$pred" "$meas" "$(awk -v e="$err" 'BEGIN { print e * 100 }')" \
                        "$k_row" "$s_row" "$cpu" "$frac" "$cores" "$busy" "$spread" "$([ "$bound" = 1 ] && echo ": host-bound")" "$wall"
                done
            done
        done
    done
done
if [ "$estimate" = 1 ]; then
    echo "validate: about $((est_total / 60)) min for $n_total runs (an estimate: the runs' set-up and K x $iters x the predicted iteration; nothing was run)"
    exit 0
fi
left=$(ip netns list | grep -c '^pns' || true)
[ "$left" = 0 ] || echo "validate: warning: $left pns* namespaces exist (another run, or a leak)" >&2

[ -t 2 ] && printf '\r\033[K' >&2
echo "wrote $csv ($((n_runs - n_failed)) of $n_runs runs, $(( $(date +%s) - t_start )) s)"
if command -v gnuplot >/dev/null && [ "$(wc -l <"$csv")" -gt 1 ]; then
    gnuplot -e "csv='$csv'; out='$out/validate'" reports/validate.gp &&
        echo "plot: $out/validate.png, $out/validate.svg"
fi
. experiments/lib/error_summary.bash
summary() { error_summary "$csv" "$@"; } # summary LABEL KEEP [D]
summary "configurations" any || exit 1
summary "configurations that are not host-bound" 0
if [ "$(echo $devices_list | wc -w)" -gt 1 ]; then # each devices-per-node grid apart
    for devices in $devices_list; do
        summary "configurations of $devices devices per node" any "$devices"
        summary "of them not host-bound" 0 "$devices"
    done
fi
# how far the runs of one configuration lie apart: an error within this is within the noise
# of the measurement itself
awk -F, 'NR > 1 && $14 > 1 && $6 > 0 { print ($16 - $15) / $6 }' "$detail" | sort -g | awk '
    { v[NR] = $1 } END {
        if (NR == 0) exit
        med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "spread of the runs of one configuration, (slowest - fastest) / measured, over %d configurations: median %.1f%%, worst %.1f%%\n", NR, med * 100, v[NR] * 100 }'
[ $n_failed = 0 ]
exit
}
