#!/usr/bin/env bash
# Distributed training under a real `mpirun -np 4` (Open MPI): each rank takes its identity
# from OMPI_COMM_WORLD_*, the job trains an MLP on synthetic data with the hybrid scheme and
# rank 0 reports every 10 steps. Exit 77 (skip) without mpirun.
set -u
build=${1:-build}
. "$(dirname "$0")/lib/common.bash"
require_open_mpi
port=$(free_port) || exit 1
keys=$(mktemp -d)
trap 'rm -rf "$keys"' EXIT
"$build/poseidon" keygen --ranks 4 -o "$keys/k" >/dev/null || { echo "FAIL: keygen"; exit 1; }
# without keys, a launched job is refused with the command that makes them
out=$(timeout 60 mpirun "${MPIRUN_ARGS[@]}" -np 2 -x MASTER_PORT=$port \
      "$build/poseidon" train --model models/mlp.net --data synthetic --iterations 2 2>&1)
echo "$out" | grep -q "needs its keys: poseidon keygen --ranks 2" ||
    { echo "$out" | tail -5; echo "FAIL: a launched job without keys was not refused"; exit 1; }
out=$(timeout 120 mpirun "${MPIRUN_ARGS[@]}" -np 4 -x MASTER_PORT=$port \
      "$build/poseidon" train --keys "$keys/k" --model models/mlp.net --scheme hybrid --data synthetic \
      --synthetic-n 2048 --batch 8 --iterations 30 --report-every 10 2>&1); rc=$?
echo "$out" | grep -v '^\[' | tail -8
[ $rc -eq 0 ] || { echo "$out" | tail -20; echo "FAIL: mpirun exited $rc"; exit 1; }
n=$(echo "$out" | grep -cE '^\[rank 0\] [0-9.]+,(10|20|30),[0-9.]+,')
[ "$n" -eq 3 ] || n=$(echo "$out" | grep -cE '^[0-9.]+,(10|20|30),[0-9.]+,')
[ "$n" -eq 3 ] || { echo "$out" | tail -20; echo "FAIL: $n of 3 report rows"; exit 1; }
k=$(echo "$out" | grep -c "of 4 (Open MPI)")
[ "$k" -eq 4 ] || { echo "FAIL: $k of 4 ranks took their identity from Open MPI"; exit 1; }
echo "ok: 4 ranks under mpirun trained 30 steps"
