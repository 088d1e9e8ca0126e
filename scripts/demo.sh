#!/usr/bin/env bash
# demo.sh BUILD-DIR: the main job, end to end — the networks of the Poseidon papers, then
# (as the parts exist) a simulated scaling experiment with its plot and a short real training.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
mkdir -p out/demo
echo "== VGG19, per layer (poseidon model show models/vgg19.net)"
"$build/poseidon" model show models/vgg19.net
echo
echo "== the benchmark networks"
printf '%-22s %15s %18s\n' network params "fwd GFLOP/sample"
for f in models/*.net; do
    "$build/poseidon" model show "$f" --csv 2>/dev/null |
        awk -F, -v n="$(basename "$f" .net)" '$1=="total" {printf "%-22s %15d %18.3f\n", n, $4, $5/1e9}'
done
