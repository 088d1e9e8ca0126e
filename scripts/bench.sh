#!/usr/bin/env bash
# bench.sh BUILD-DIR: runs every scripts/bench_*.sh; each writes its CSV under out/bench/.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
mkdir -p out/bench
rc=0
for b in scripts/bench_*.sh; do
    [ -e "$b" ] || continue
    echo "== $b"
    bash "$b" "$build" || { echo "FAILED: $b" >&2; rc=1; }
done
echo "benchmark CSVs:"; ls -1 out/bench/*.csv 2>/dev/null | sed 's/^/  /'
exit $rc
