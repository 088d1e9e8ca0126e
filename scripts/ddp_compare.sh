#!/usr/bin/env bash
# ddp_compare.sh BUILD-DIR: poseidon train against PyTorch DistributedDataParallel on the same
# emulated links. NODES (default 4) emulated nodes (experiments/emucluster.sh: a network
# namespace each, RATE links, default 1gbit, fair queue), real CPU compute, one BLAS thread per
# rank, synthetic data, batch 16 per worker; for each network of NETS (default: lenet, and
# mlp-wide: 784-4096-4096-10, 20 M parameters, made here), PyTorch DDP (gloo, 25 MB buckets;
# scripts/ddp_train.py) and poseidon under each scheme of SCHEMES (default allreduce+wfbp with
# 25 MB buckets, ps+wfbp, hybrid) with the job's keys: CURVE, or with TRANSPORT=fabric
# --trusted-fabric, and each KEY=VALUE of SET (space-separated, e.g. SET="send_order=fair")
# as --set KEY=VALUE. The PS tensors are split evenly over the shards (KV_BLOCK_MB, default 0;
# 4 is Poseidon-TF's block), so PS moves the ring's bytes: with 4 MB blocks LeNet's fc1 lands
# on 2 of the 4 shards. REPS rounds (default 3), each running every configuration once in turn,
# so a busy machine weighs on all alike; the median images/s of each, over the iterations
# after the first fifth. Prints the table (images/s and the ratio to DDP), writes
# out/bench/ddp_compare.csv (net,config,rep,images_per_s,cpu_ms_per_iteration: a poseidon
# rank's CPU per steady iteration, the mean over the ranks) and out/bench/ddp_compare.md.
# Needs root (namespaces) and PyTorch (python3-torch: make bench installs it); exits 77 (skip)
# without namespaces.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
. tests/integration/lib/common.bash
require_netns
py=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
"$py" -c 'import torch' 2>/dev/null ||
    { echo "ddp_compare: PyTorch is missing (make bench installs python3-torch)" >&2; exit 1; }
nodes=${NODES:-4}
rate=${RATE:-1gbit}
reps=${REPS:-3}
nets=${NETS:-lenet mlp-wide}
schemes=${SCHEMES:-allreduce+wfbp ps+wfbp hybrid}
transport=${TRANSPORT:-curve}
kv_block_mb=${KV_BLOCK_MB:-0}
batch=16
mkdir -p out/bench
csv=out/bench/ddp_compare.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/mlp-wide.net" <<'NET'
# 784-4096-4096-10 with ReLU: 20,037,642 parameters
input        data shape=1x28x28
fc           fc1  out=4096
relu         relu1
fc           fc2  out=4096
relu         relu2
fc           fc3  out=10
softmax_loss loss
NET
"$build/poseidon" keygen --ranks "$nodes" -o "$tmp/keys" >/dev/null || fail "keygen"
flag=""
[ "$transport" = fabric ] && flag=--trusted-fabric
sets=()
for kv in ${SET:-}; do sets+=(--set "$kv"); done
echo "net,config,rep,images_per_s,cpu_ms_per_iteration" >"$csv"

net_file() { [ "$1" = mlp-wide ] && echo "$tmp/mlp-wide.net" || echo "models/$1.net"; }
# iterations per network (the first fifth is the warm-up): about 20-60 s a run here
iters_of() { [ "$1" = mlp-wide ] && echo 20 || echo 120; }

# One run: run_one NET CONFIG LOGDIR; prints images/s (empty when the run failed).
run_one() {
    local net=$1 cfg=$2 dir=$3 it warm
    it=$(iters_of "$net")
    warm=$((it / 5))
    mkdir -p "$dir"
    if [ "$cfg" = ddp ]; then
        OMP_NUM_THREADS=1 timeout 600 experiments/emucluster.sh -n "$nodes" -r "$rate" -l "$dir" -- \
            "$py" scripts/ddp_train.py "$(net_file "$net")" $batch "$it" "$warm" 25 >/dev/null 2>&1
        sed -n 's/.*images_per_s \([0-9.]*\).*/\1/p' "$dir/rank0.log" | tail -1
        return
    fi
    OPENBLAS_NUM_THREADS=1 timeout 600 experiments/emucluster.sh -n "$nodes" -r "$rate" -l "$dir" -- \
        "$build/poseidon" train --keys "$tmp/keys" $flag --model "$(net_file "$net")" \
        --scheme "$cfg" --bucket-mb 25 --kv-block-mb "$kv_block_mb" --data synthetic --batch $batch --iterations "$it" \
        --no-eval --no-probe --job-out none --report-every "$warm" --csv "$dir/run.csv" "${sets[@]}" \
        >/dev/null 2>&1
    # images/s over the rows after the warm-up: (iterations x batch x nodes) / seconds
    awk -F, -v w="$warm" -v b=$batch -v n="$nodes" 'NR > 1 && $2 >= w {
        if (!s) { s = 1; i0 = $2; t0 = $7 } i1 = $2; t1 = $7 }
        END { if (s && t1 > t0) printf "%.1f\n", (i1 - i0) * b * n / (t1 - t0) }' "$dir/run.csv" 2>/dev/null
}

# cpu_ms DIR: a rank's CPU ms per steady iteration, the mean over the ranks' logs (poseidon
# logs "steady_cpu_s S ... iterations I"); with the ranks sharing the host's cores, it says
# whether a row was bound by them (ranks x cpu_ms against cores x the iteration's ms)
cpu_ms() {
    cat "$1"/rank*.log 2>/dev/null | awk '/steady_cpu_s/ {
        for (i = 1; i < NF; i++) { if ($i == "steady_cpu_s") c = $(i + 1); if ($i == "iterations") it = $(i + 1) }
        if (it > 0) { sum += c / it * 1000; n++ } }
        END { if (n) printf "%.1f", sum / n }'
}

for net in $nets; do
    for rep in $(seq "$reps"); do
        for cfg in ddp $schemes; do
            ips=$(run_one "$net" "$cfg" "$tmp/$net-$cfg-$rep")
            [ -n "$ips" ] || { tail -3 "$tmp/$net-$cfg-$rep"/rank0.log >&2; fail "$net $cfg: no result"; }
            cpu=""
            [ "$cfg" = ddp ] || cpu=$(cpu_ms "$tmp/$net-$cfg-$rep")
            echo "$net,$cfg,$rep,$ips,$cpu" >>"$csv"
            echo "ddp_compare: $net $cfg round $rep: $ips images/s${cpu:+, $cpu ms of CPU per iteration and rank}"
        done
    done
done
# the table: median per (net, config), ratio to DDP's median
awk -F, -v schemes="$schemes" -v transport="$transport" -v nodes="$nodes" -v rate="$rate" '
    NR > 1 { v[$1 "," $2] = v[$1 "," $2] " " $4; if (!($1 in seen)) { seen[$1] = 1; order[++nn] = $1 } }
    function median(s,   a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
        ns = split(schemes, sc, " ")
        printf "%d emulated nodes at %s, batch 16 per worker, poseidon over %s; images/s (ratio to DDP)\n\n", nodes, rate, transport
        printf "| network | PyTorch DDP |"; for (i = 1; i <= ns; i++) printf " %s |", sc[i]; printf "\n|---|---|"
        for (i = 1; i <= ns; i++) printf "---|"; printf "\n"
        for (k = 1; k <= nn; k++) {
            m = order[k]; d = median(v[m ",ddp"])
            printf "| %s | %.0f |", m, d
            for (i = 1; i <= ns; i++) { x = median(v[m "," sc[i]]); printf " %.0f (%.2f) |", x, x / d }
            printf "\n"
        }
    }' "$csv" | tee out/bench/ddp_compare.md
