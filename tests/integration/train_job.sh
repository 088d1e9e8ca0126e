#!/usr/bin/env bash
# One job description for both executors: `poseidon train EXPERIMENT` runs the job that
# `poseidon plan`/`poseidon sim` read from the same file, with the same per-layer plan; the
# run writes the experiment it executed (the probe's link included), on which `poseidon plan`
# gives the plan the run executed and `poseidon sim` predicts it, and `poseidon train` on it
# replays that plan (same hash, same parameters); the shorthand flags set the same keys as the
# file; a sweep, or a launcher whose ranks do not match the job's nodes, is a clear error.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$build/poseidon

cat >"$tmp/job.exp" <<EXP
model = $root/models/mlp.net
cluster = $root/experiments/clusters/emu-veth.cluster
cluster.nic_gbps = 0.5
scheme = hybrid3
batch = 8
iterations = 4
kv_block_mb = 0.25
data = synthetic
synthetic_n = 512
probe = no
EXP
# the plan of the file, and the plan the run executes (rank 0's --print-plan)
"$bin" plan "$tmp/job.exp" 2>/dev/null | grep -v '^# poseidon' >"$tmp/plan.txt"
[ -s "$tmp/plan.txt" ] || fail "poseidon plan printed nothing"
timeout 120 "$bin" train "$tmp/job.exp" --print-plan --no-eval --job-out "$tmp/ran.exp" \
    --timeout-ms 20000 >"$tmp/run.log" 2>&1 || { tail -5 "$tmp/run.log"; fail "train EXPERIMENT exited non-zero"; }
grep -q "rank 1 of 2" "$tmp/run.log" || fail "the job's 2 nodes did not become 2 local ranks"
grep -Fx -f "$tmp/plan.txt" "$tmp/run.log" >"$tmp/ran-plan.txt"
diff "$tmp/plan.txt" "$tmp/ran-plan.txt" >/dev/null ||
    { diff "$tmp/plan.txt" "$tmp/ran-plan.txt" | head; fail "the run's plan is not poseidon plan's"; }
"$bin" plan "$tmp/ran.exp" 2>/dev/null | grep -v '^# poseidon' >"$tmp/plan-ran.txt"
diff "$tmp/plan.txt" "$tmp/plan-ran.txt" >/dev/null || fail "the written job plans differently"

# the same job from flags: the written experiments agree key for key
timeout 120 "$bin" train --workers 2 --model models/mlp.net \
    --cluster experiments/clusters/emu-veth.cluster --set cluster.nic_gbps=0.5 --scheme hybrid3 \
    --batch 8 --iterations 4 --kv-block-mb 0.25 --data synthetic --synthetic-n 512 --no-probe \
    --no-eval --job-out "$tmp/ran-flags.exp" --timeout-ms 20000 >"$tmp/flags.log" 2>&1 ||
    { tail -5 "$tmp/flags.log"; fail "train with flags exited non-zero"; }
diff <(grep -v '^#' "$tmp/ran.exp") <(grep -v '^#' "$tmp/ran-flags.exp") ||
    fail "the flags and the experiment file made different jobs"

# with the link probe: the written job holds the measured link, and plans as the run did
timeout 120 "$bin" train "$tmp/job.exp" --set probe=yes --set scheme=hybrid --print-plan --no-eval \
    --job-out "$tmp/probed.exp" --params-out "$tmp/p1" --timeout-ms 20000 >"$tmp/probed.log" 2>&1 ||
    { tail -5 "$tmp/probed.log"; fail "probed run exited non-zero"; }
grep -q "cluster.nic_efficiency = 1$" "$tmp/probed.exp" || fail "no measured link in the written job"
grep -q "^probe = no$" "$tmp/probed.exp" || fail "the written job would probe again"
# running the written job again replays the plan: same hash, same parameters
timeout 120 "$bin" train "$tmp/probed.exp" --no-eval --params-out "$tmp/p2" --timeout-ms 20000 \
    >"$tmp/replay.log" 2>&1 || { tail -5 "$tmp/replay.log"; fail "the replay exited non-zero"; }
h1=$(sed -n 's/.*plan hash \([0-9a-f]*\).*/\1/p' "$tmp/probed.log" | head -1)
h2=$(sed -n 's/.*plan hash \([0-9a-f]*\).*/\1/p' "$tmp/replay.log" | head -1)
[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "the replay ran plan '$h2', the run '$h1'"
grep -q "plan hash $h1" "$tmp/probed.exp" || fail "the written job does not name its plan's hash"
cmp -s "$tmp/p1.0" "$tmp/p2.0" && cmp -s "$tmp/p1.1" "$tmp/p2.1" ||
    fail "the replay of the written job ended with other parameters"
# --link: the link given instead of probed
timeout 120 "$bin" train "$tmp/job.exp" --link 0.94,70 --no-eval --job-out "$tmp/link.exp" \
    --timeout-ms 20000 >"$tmp/link.log" 2>&1 || { tail -5 "$tmp/link.log"; fail "--link run exited non-zero"; }
grep -q "^cluster.nic_gbps = 0.94$" "$tmp/link.exp" && grep -q "^cluster.latency_us = 70$" "$tmp/link.exp" &&
    grep -q "^cluster.nic_efficiency = 1$" "$tmp/link.exp" || fail "--link did not set the link: $(grep cluster "$tmp/link.exp")"
out=$("$bin" train "$tmp/job.exp" --link fast 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q -- "--link expects" || fail "--link fast: $out"
"$bin" plan "$tmp/probed.exp" 2>/dev/null | grep -v '^# poseidon' >"$tmp/plan-probed.txt"
grep -Fx -f "$tmp/plan-probed.txt" "$tmp/probed.log" >"$tmp/ran-probed.txt"
diff "$tmp/plan-probed.txt" "$tmp/ran-probed.txt" >/dev/null ||
    { diff "$tmp/plan-probed.txt" "$tmp/ran-probed.txt" | head; fail "the probed run's plan is not the written job's"; }
rows=$("$bin" sim "$tmp/probed.exp" --csv - 2>/dev/null | grep -c '^mlp,2,')
[ "$rows" = 1 ] || fail "poseidon sim on the written job gave $rows rows"

# a single-worker run writes its job too, and the simulator reads it
timeout 120 "$bin" train --model models/mlp.net --data synthetic --limit 256 --batch 32 --epochs 1 \
    --job-out "$tmp/single.exp" >"$tmp/single.log" 2>&1 || { tail -5 "$tmp/single.log"; fail "single-worker run"; }
grep -q "^iterations = 8$" "$tmp/single.exp" && grep -q "^cluster.nodes = 1$" "$tmp/single.exp" ||
    fail "the single-worker job: $(grep -v '^#' "$tmp/single.exp" | head -5)"
"$bin" sim "$tmp/single.exp" --csv - 2>/dev/null | grep -q '^mlp,1,' || fail "poseidon sim on the single-worker job"

# bad jobs: one line, exit 2, before anything runs
out=$("$bin" train "$tmp/job.exp" --set sweep_nodes=2,4 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "2 configurations" || fail "a sweep was not refused (exit $rc): $out"
port=$(free_port) || exit 1
out=$(RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 20 "$bin" train "$tmp/job.exp" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "the job is for 2 nodes, the launcher started 3 ranks" ||
    fail "a launcher with 3 ranks for a 2-node job was not refused (exit $rc): $out"
out=$("$bin" train "$tmp/job.exp" --batch 0 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q -- "--batch: expected batch" || fail "--batch 0: $out"
# every rank's log line is written whole (one write per line): no line holds two ranks' text
if cat "$tmp"/*.log | grep -E "rank [0-9]+ endpoint.*rank [0-9]+ endpoint|[^ ]rank [0-9]+ of [0-9]+"; then
    fail "ranks' log lines broke into each other"
fi
echo "ok: train EXPERIMENT ran poseidon plan's plan; the written job replans and simulates the run"
