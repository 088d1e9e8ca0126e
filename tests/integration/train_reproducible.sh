#!/usr/bin/env bash
# A distributed run is reproducible: the same command twice (4 workers, BSP, PS for every
# layer and then hybrid) ends with bit-identical parameters on every rank. Pushes reach a PS
# shard in any order, so this holds only because shards sum them in rank order.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for scheme in ps hybrid hybrid3; do
    for run in 1 2; do
        timeout 120 "$build/poseidon" train --workers 4 --model models/mlp.net --scheme "$scheme" \
            --data synthetic --synthetic-n 2048 --batch 16 --iterations 40 --no-eval \
            --params-out "$tmp/$scheme-$run" >"$tmp/log" 2>&1 ||
            { tail -5 "$tmp/log"; fail "$scheme run $run exited non-zero"; }
    done
    for r in 0 1 2 3; do
        cmp -s "$tmp/$scheme-1.$r" "$tmp/$scheme-2.$r" ||
            fail "$scheme: rank $r's parameters differ between two identical runs"
    done
    cmp -s "$tmp/$scheme-1.0" "$tmp/$scheme-1.3" || fail "$scheme: ranks 0 and 3 disagree"
done
echo "ps, hybrid and hybrid3: two runs bit-identical on all 4 ranks"
