#!/usr/bin/env bash
# Rendezvous, plan-blob broadcast, PS push/pull and ring all-reduce across 4 processes
# started by a real `mpirun -np 4` (Open MPI): each rank finds its identity in
# OMPI_COMM_WORLD_* and the job checks every value. Exit 77 (skip) without mpirun.
set -u
build=${1:-build}
. "$(dirname "$0")/lib/common.bash"
require_open_mpi
port=$(free_port) || exit 1
keys=$(mktemp -d)
trap 'rm -rf "$keys"' EXIT
"$build/poseidon" keygen --ranks 4 -o "$keys/k" >/dev/null || { echo "FAIL: keygen"; exit 1; }
out=$(timeout 120 mpirun "${MPIRUN_ARGS[@]}" -np 4 -x MASTER_PORT=$port \
      "$build/poseidon" comm-test --iters 3 --floats 50000 --block-bytes 65536 --keys "$keys/k" 2>&1); rc=$?
echo "$out" | tail -20
[ $rc -eq 0 ] || { echo "FAIL: mpirun exited $rc"; exit 1; }
n=$(echo "$out" | grep -c "ok: 3 iterations of PS and all-reduce exact")
[ "$n" -eq 4 ] || { echo "FAIL: $n of 4 ranks reported ok"; exit 1; }
echo "$out" | grep -q "(Open MPI)" || { echo "FAIL: ranks did not take their identity from Open MPI"; exit 1; }
echo "ok: 4 ranks under mpirun"
