#!/usr/bin/env bash
# net_model_error.sh [BUILD-DIR]: how far the grouped network model (net_model = whole) is
# from exact per-flow max-min on the paper networks: iteration time (2 iterations, the second
# measured) of VGG19, ResNet-152, GoogLeNet and Inception-V3, hybrid and ps, 10 and 40 GbE,
# at 64, 256 and 1,024 nodes, with both models. Writes out/net_model_error.csv
# (model,nodes,gbps,scheme,exact_s,whole_s,rel_err; rel_err = whole / exact - 1) and prints
# the median and the worst |rel_err|. Takes about 20 s on one core.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
bin=$build/poseidon
[ -x "$bin" ] || { echo "net_model_error.sh: $bin not built" >&2; exit 1; }
mkdir -p out
out=out/net_model_error.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model,nodes,gbps,scheme,exact_s,whole_s,rel_err" > "$out"
for m in vgg19 resnet-152 googlenet inception-v3; do
    for nm in exact whole; do
        "$bin" sim "experiments/$m.exp" --set sweep_nodes=64,256,1024 --set sweep_gbps=10,40 \
            --set sweep_schemes=hybrid,ps --set iterations=2 --set net_model=$nm \
            --csv "$tmp/$m-$nm.csv" > /dev/null 2> "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    done
    # columns: 1 model, 2 nodes, 3 gbps, 4 scheme, 7 iter_s
    paste -d, "$tmp/$m-exact.csv" "$tmp/$m-whole.csv" | awk -F, -v nf=20 'NR > 1 {
        printf "%s,%s,%s,%s,%s,%s,%.5f\n", $1, $2, $3, $4, $7, $(nf + 7), $(nf + 7) / $7 - 1 }' >> "$out"
done
awk -F, 'NR > 1 { e = $7 < 0 ? -$7 : $7; print e }' "$out" | sort -g | awk '
    { v[NR] = $1 } END { printf "grouped vs exact iteration time over %d runs: median |error| %.2f%%, worst %.2f%%\n",
                          NR, 100 * (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), 100 * v[NR] }'
