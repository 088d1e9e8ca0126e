#!/usr/bin/env bash
# send_order.sh [options]: one configuration (ps+wfbp by default; sfb+wfbp, allreduce+wfbp or
# any other scheme with --scheme) run for real in arrival order and by layer
# (the experiment key send_order, docs/runtime.md "Send order"), each against its
# simulation: per run, the simulator's time per iteration, the measured one (as
# experiments/validate.sh measures it: (end of iteration T-1 - end of W-1) / (T - W) from the
# merged trace) and every iteration's own time, to see whether the run holds one pace.
#
#   --model M       a network under models/ (default googlenet)
#   --nodes N       emulated nodes (default 4)
#   --gbps G        link rate (default 1)
#   --scheme S      default ps+wfbp
#   --orders "..."  default "arrival layer"
#   --slice-bytes B send_order = layer's slice (default: the key's default)
#   --iterations T  (default 12); the first 3 are not measured
#   --dilation K    time dilation (default 4: 4 ranks on a 2-core host are host-bound at 1)
#   --repeat R      runs per order, alternating the orders (default 1)
#   --out DIR       default out/send_order
#   --build DIR     where poseidon is (default build)
# The compute is emulated from the validation profile (experiments/validate_profile.sh,
# batch 16, 0.3 s per forward + backward), the links by experiments/emucluster.sh (root).
set -u
model=googlenet n=4 g=1 scheme=ps+wfbp orders="arrival layer" slice="" iters=12 k=4 repeat=1
out=out/send_order build=build
while [ $# -gt 0 ]; do
    case $1 in
    --model) model=$2; shift 2 ;;
    --nodes) n=$2; shift 2 ;;
    --gbps) g=$2; shift 2 ;;
    --scheme) scheme=$2; shift 2 ;;
    --orders) orders=$2; shift 2 ;;
    --slice-bytes) slice=$2; shift 2 ;;
    --iterations) iters=$2; shift 2 ;;
    --dilation) k=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "send_order.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$out/poseidon
cp "$build/poseidon" "$bin" || exit 1 # a private copy: a rebuild must not change a run
prof=$out/$model-b16.csv
"$root/experiments/validate_profile.sh" "$bin" "$root/models/$model.net" 16 0.3 >"$prof" || exit 1
cl=$out/emu-${g}g.cluster
sed -e "s/^nic_gbps = .*/nic_gbps = $g/" "$root/experiments/clusters/emu-veth.cluster" >"$cl"
rate=$(awk -v g="$g" 'BEGIN { printf "%dmbit", g * 1000 + 0.5 }')
echo "order,run,predicted_s,measured_s,error,iterations_s"
for r in $(seq 1 "$repeat"); do
    for order in $orders; do
        exp=$out/$model-n$n-${g}g-$scheme-$order.exp
        {
            echo "model = $root/models/$model.net"
            echo "cluster = $cl"
            echo "profile = $prof"
            echo "batch = 16"
            echo "iterations = $iters"
            echo "warmup = 3"
            echo "kv_block_mb = 4"
            echo "sweep_nodes = $n"
            echo "sweep_gbps = $g"
            echo "sweep_schemes = $scheme"
            echo "send_order = $order"
            [ -n "$slice" ] && echo "slice_bytes = $slice"
            echo "compute = emulate"
            echo "data = synthetic"
            echo "synthetic_n = 4096"
            echo "probe = no"
        } >"$exp"
        "$bin" sim "$exp" --csv "${exp%.exp}.sim.csv" >/dev/null 2>&1 || { echo "sim of $exp failed" >&2; exit 1; }
        pred=$(awk -F, 'NR > 1 { print $7; exit }' "${exp%.exp}.sim.csv")
        rd=$out/run-$model-$order-$r
        rm -rf "$rd"; mkdir -p "$rd"
        "$bin" keygen --ranks "$n" -o "$rd/keys" >/dev/null || exit 1
        timeout $((600 * k)) "$root/experiments/emucluster.sh" -n "$n" -r "$rate" -q fair -k "$k" -l "$rd/logs" -- \
            nice -n -10 "$bin" train "$exp" --set time_dilation="$k" --no-eval --timeout-ms 60000 \
            --trace "$rd/trace" --job-out "$rd/job.exp" --keys "$rd/keys" >"$rd/out.log" 2>&1 ||
            { echo "run $rd failed: $rd/out.log" >&2; continue; }
        awk -F, -v T="$iters" -v W=3 -v p="$pred" -v o="$order" -v r="$r" '
            NR > 1 && $8 > e[$2] { e[$2] = $8 }
            END { m = (e[T - 1] - e[W - 1]) / (T - W) / 1e9
                  its = ""; for (t = 1; t < T; t++) its = its sprintf("%s%.3f", t > 1 ? " " : "", (e[t] - e[t - 1]) / 1e9)
                  printf "%s,%d,%.4f,%.4f,%+.1f%%,%s\n", o, r, p, m, (m - p) / p * 100, its }' "$rd/trace.csv"
    done
done
