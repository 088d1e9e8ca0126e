#!/usr/bin/env bash
# bench_transport.sh BUILD-DIR: what security costs. PS push/pull goodput between two local
# ranks over loopback (no link limit, so the CPU is the bound), with the job's sockets
# encrypted (CURVE, the default), authenticated but unencrypted (--trusted-fabric: fabric),
# and in plain TCP (--insecure), for KV blocks of 64 KB .. 16 MB. Rank 0 pushes then pulls
# TOTAL bytes per iteration to a shard on rank 1 (comm-test --mode bench). Each block size
# runs the three transports REPS times (default 3) in turn, so a busy machine weighs on all
# alike, and keeps each one's median. Writes out/bench/transport.csv: transport,block_bytes,
# total_bytes,iters,seconds,goodput_Bps (the median run), and on the console the ratios of
# CURVE's and the fabric's goodput to plain TCP's per block size.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
total=${BENCH_TRANSPORT_TOTAL_BYTES:-67108864}
iters=${BENCH_TRANSPORT_ITERS:-3}
reps=${BENCH_TRANSPORT_REPS:-3}
mkdir -p out/bench
csv=out/bench/transport.csv
echo "transport,block_bytes,total_bytes,iters,seconds,goodput_Bps" >"$csv"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for block in 65536 1048576 16777216; do
    : >"$runs"
    for _ in $(seq "$reps"); do
        for transport in curve fabric plain; do
            flag=""
            [ $transport = plain ] && flag=--insecure
            [ $transport = fabric ] && flag=--trusted-fabric
            row=$("$build/poseidon" comm-test --workers 2 --mode bench --block-bytes $block \
                  --total-bytes "$total" --iters "$iters" --timeout-ms 60000 $flag 2>/dev/null |
                  grep -E '^[0-9]+,[0-9]+,' | tail -1)
            [ -n "$row" ] || { echo "bench_transport: $transport, block $block: no result"; exit 1; }
            echo "$transport,$row" >>"$runs"
        done
    done
    for transport in curve fabric plain; do # the median run of each
        grep "^$transport," "$runs" | sort -t, -k6,6g | sed -n "$(( (reps + 1) / 2 ))p" >>"$csv"
    done
    awk -F, -v b=$block '$2 == b { g[$1] = $6 } END {
        printf "bench_transport: block %d B: CURVE %.0f MB/s (%.2f of plain), fabric %.0f MB/s (%.2f), plain %.0f MB/s\n",
               b, g["curve"] / 1e6, g["curve"] / g["plain"], g["fabric"] / 1e6,
               g["fabric"] / g["plain"], g["plain"] / 1e6 }' "$csv"
done
echo "bench_transport: wrote $csv"
