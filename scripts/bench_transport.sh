#!/usr/bin/env bash
# bench_transport.sh BUILD-DIR: what CURVE costs. PS push/pull goodput between two local
# ranks over loopback (no link limit, so the CPU is the bound), with the job's sockets
# encrypted (the default) and in plain TCP (--insecure), for KV blocks of 64 KB .. 16 MB.
# Rank 0 pushes then pulls TOTAL bytes per iteration to a shard on rank 1 (comm-test --mode
# bench). Writes out/bench/transport.csv: transport,block_bytes,total_bytes,iters,seconds,
# goodput_Bps, and the ratio of the two goodputs per block size on the console.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
total=${BENCH_TRANSPORT_TOTAL_BYTES:-67108864}
iters=${BENCH_TRANSPORT_ITERS:-3}
mkdir -p out/bench
csv=out/bench/transport.csv
echo "transport,block_bytes,total_bytes,iters,seconds,goodput_Bps" >"$csv"
for block in 65536 1048576 16777216; do
    for transport in curve plain; do
        flag=""; [ $transport = plain ] && flag=--insecure
        row=$("$build/poseidon" comm-test --workers 2 --mode bench --block-bytes $block \
              --total-bytes "$total" --iters "$iters" --timeout-ms 60000 $flag 2>/dev/null |
              grep -E '^[0-9]+,[0-9]+,' | tail -1)
        [ -n "$row" ] || { echo "bench_transport: $transport, block $block: no result"; exit 1; }
        echo "$transport,$row" >>"$csv"
    done
    awk -F, -v b=$block '$2 == b { g[$1] = $6 } END {
        printf "bench_transport: block %d B: CURVE %.0f MB/s, plain %.0f MB/s (%.2f)\n",
               b, g["curve"] / 1e6, g["plain"] / 1e6, g["curve"] / g["plain"] }' "$csv"
done
echo "bench_transport: wrote $csv"
