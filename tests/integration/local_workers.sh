#!/usr/bin/env bash
# `poseidon comm-test --workers N` (the local launcher) for N = 1..5 and with SSP(2):
# PS values and all-reduce sums exact on every rank.
set -u
build=${1:-build}
for n in 1 2 3 5; do
    out=$(timeout 60 "$build/poseidon" comm-test --workers $n --iters 3 --floats 30000 --block-bytes 16384 2>&1); rc=$?
    k=$(echo "$out" | grep -c ": ok: ")
    [ $rc -eq 0 ] && [ "$k" -eq $n ] || { echo "$out" | tail; echo "FAIL: $n workers (rc $rc, $k ok)"; exit 1; }
done
out=$(timeout 60 "$build/poseidon" comm-test --workers 4 --iters 6 --staleness 2 --floats 20000 2>&1) \
    || { echo "$out" | tail; echo "FAIL: SSP(2) run"; exit 1; }
# an inconsistent environment is a clear error, not a hang
out=$(RANK=5 WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 timeout 10 "$build/poseidon" comm-test 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "RANK=5 is not below WORLD_SIZE=4" || { echo "$out"; echo "FAIL: bad env (rc $rc)"; exit 1; }
echo "ok"
