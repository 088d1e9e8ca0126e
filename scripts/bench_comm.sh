#!/usr/bin/env bash
# bench_comm.sh BUILD-DIR: PS push/pull goodput over a rate-limited link between two
# emulated hosts (network namespaces, tc tbf; experiments/emucluster.sh), for KV block sizes
# 64 KB .. 16 MB. Rank 0 pushes then pulls TOTAL bytes per iteration to a shard on rank 1;
# goodput = payload bytes moved (push + pull) / elapsed. Each direction of the link runs at
# RATE, and push and pull alternate, so the ideal goodput is RATE itself.
# Writes out/bench/comm.csv. Needs root (namespaces); otherwise says so and writes nothing.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rate_mbit=${BENCH_COMM_RATE_MBIT:-1000}
total=${BENCH_COMM_TOTAL_BYTES:-67108864}
iters=${BENCH_COMM_ITERS:-3}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
    echo "bench_comm: skipped: needs root and network namespaces"
    exit 0
fi
mkdir -p out/bench
csv=out/bench/comm.csv
echo "block_bytes,total_bytes,iters,seconds,goodput_Bps,link_Bps,efficiency" > "$csv"
link_Bps=$((rate_mbit * 1000000 / 8))
keys=$(mktemp -d)/keys
"$build/poseidon" keygen --ranks 2 -o "$keys" >/dev/null || exit 1
for block in 65536 262144 1048576 4194304 16777216; do
    row=$(experiments/emucluster.sh -n 2 -r "${rate_mbit}mbit" -- "$build/poseidon" comm-test \
          --mode bench --block-bytes $block --total-bytes $total --iters $iters --timeout-ms 60000 \
          --keys "$keys" \
          2>&1 | sed -n 's/^\[rank 0\] \([0-9][0-9,.]*\)$/\1/p')
    [ -n "$row" ] || { echo "bench_comm: block $block: no result"; exit 1; }
    eff=$(echo "$row" | awk -F, -v l=$link_Bps '{printf "%.3f", $5 / l}')
    echo "$row,$link_Bps,$eff" >> "$csv"
    echo "bench_comm: block $block B: $(echo "$row" | awk -F, '{printf "%.1f MB/s", $5/1e6}') = $eff of ${rate_mbit} Mbit/s"
done
echo "bench_comm: wrote $csv"
