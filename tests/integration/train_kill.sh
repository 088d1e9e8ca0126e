#!/usr/bin/env bash
# A worker of a distributed training run killed mid-run (SIGKILL to rank 2 once training is
# under way) must make every other worker exit non-zero within 10 s, each naming its node and
# the iteration and layer it was at; the job must not hang.
set -u
build=${1:-build}
fail() { echo "FAIL: $*"; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
timeout 120 "$build/poseidon" train --workers 4 --model models/mlp.net --scheme hybrid \
    --data synthetic --synthetic-n 4096 --batch 8 --iterations 1000000 --report-every 20 \
    --no-eval >"$log" 2>&1 &
job=$!
# the launcher is the child of `timeout`; its children are the ranks
for _ in $(seq 100); do
    [ "$(grep -c '^[0-9.]*,20,' "$log")" -ge 1 ] && break
    sleep 0.1
done
grep -q '^[0-9.]*,20,' "$log" || { kill $job; tail "$log"; fail "training did not start"; }
launcher=$(pgrep -P $job | head -1)
# the launcher forks ranks 0..3 in order: rank 2 is its third child by pid
victim=$(pgrep -P "$launcher" | sort -n | sed -n 3p)
[ -n "$victim" ] || { kill $job; fail "rank 2 not found among the launcher's children"; }
start=$(date +%s.%N)
kill -KILL "$victim"
wait $job; rc=$?
dt=$(echo "$(date +%s.%N) - $start" | bc)
grep -E "poseidon: node" "$log" | head -5
[ $rc -ne 0 ] || fail "job exited 0"
[ $rc -ne 124 ] || fail "job hung (killed by timeout)"
awk "BEGIN{exit !($dt < 10)}" || fail "others took ${dt}s to exit (limit 10 s)"
n=$(grep -cE "poseidon: node .*\(rank [013]\): iteration [0-9]+, layer [0-9]+" "$log")
[ "$n" -eq 3 ] || fail "$n of 3 survivors named node, iteration and layer"
grep -q "job aborted: node .*(rank 2)" "$log" || fail "the dead node is not named"
echo "ok: rank 2 killed, the others out in ${dt}s"
