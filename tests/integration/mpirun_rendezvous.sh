#!/usr/bin/env bash
# Rendezvous, plan-blob broadcast, PS push/pull and ring all-reduce across 4 processes
# started by a real `mpirun -np 4` (Open MPI): each rank finds its identity in
# OMPI_COMM_WORLD_* and the job checks every value. Exit 77 (skip) without mpirun.
set -u
build=${1:-build}
command -v mpirun >/dev/null 2>&1 || { echo "skip: mpirun not installed (apt-get install openmpi-bin)"; exit 77; }
mpirun --version 2>/dev/null | grep -q "Open MPI" || { echo "skip: mpirun is not Open MPI"; exit 77; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
extra=()
[ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
out=$(timeout 120 mpirun "${extra[@]}" --oversubscribe -np 4 -x MASTER_PORT=$port \
      "$build/poseidon" comm-test --iters 3 --floats 50000 --block-bytes 65536 2>&1); rc=$?
echo "$out" | tail -20
[ $rc -eq 0 ] || { echo "FAIL: mpirun exited $rc"; exit 1; }
n=$(echo "$out" | grep -c "ok: 3 iterations of PS and all-reduce exact")
[ "$n" -eq 4 ] || { echo "FAIL: $n of 4 ranks reported ok"; exit 1; }
echo "$out" | grep -q "(Open MPI)" || { echo "FAIL: ranks did not take their identity from Open MPI"; exit 1; }
echo "ok: 4 ranks under mpirun"
