#!/usr/bin/env bash
# A worker killed mid-run (SIGKILL at iteration 3, layer 1) must make every other worker
# exit non-zero within 10 s, each naming its node, the iteration and layer it was waiting
# on, and the dead node. Two cases: a worker (rank 2) and the coordinator's host (rank 0).
set -u
build=${1:-build}
fail() { echo "FAIL: $*"; exit 1; }
for victim in 2 0; do
    start=$(date +%s.%N)
    out=$(timeout 60 "$build/poseidon" comm-test --workers 4 --iters 1000 --kill-rank $victim \
          --kill-at 3 2>&1); rc=$?
    dt=$(echo "$(date +%s.%N) - $start" | bc)
    echo "$out" | grep -E "poseidon: node|coordinator:" | head -5
    [ $rc -ne 0 ] || fail "victim $victim: job exited 0"
    [ $rc -ne 124 ] || fail "victim $victim: job hung (killed by timeout)"
    awk "BEGIN{exit !($dt < 10)}" || fail "victim $victim: took ${dt}s (limit 10 s)"
    n=$(echo "$out" | grep -cE "poseidon: node .*\(rank [0-9]\): iteration 3, layer [0-9], waiting on .*(job aborted|coordinator)")
    [ "$n" -eq 3 ] || fail "victim $victim: $n of 3 survivors named node, iteration and layer"
    if [ $victim -ne 0 ]; then
        echo "$out" | grep -q "job aborted: node .*(rank $victim)" || fail "the dead node is not named"
    else
        echo "$out" | grep -Eq "the coordinator \(node .*, rank 0\) (did not answer|closed its connection)" || fail "lost coordinator not named"
    fi
    n=$(echo "$out" | grep -c "worker [0-9] exited with status 3")
    [ "$n" -eq 3 ] || fail "victim $victim: $n of 3 survivors exited with status 3"
    echo "ok: victim $victim, all others out in ${dt}s"
done
