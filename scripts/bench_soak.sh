#!/usr/bin/env bash
# bench_soak.sh BUILD-DIR: does a long job keep its memory flat? A local job of 4 workers
# runs 10,000 iterations of the MLP (models/mlp.net) on synthetic data with emulated compute
# (FWD/BWD sleep the profile's times) and the hybrid plan, while each worker's resident set
# (VmRSS) is sampled once a second. Writes out/bench/soak.csv: rank,seconds,iteration,rss_kb
# (iteration: the last one rank 0 reported), and prints per rank the RSS at the first and
# last sample after the warm-up (the first 10% of iterations) and the least-squares slope in
# KB per 1,000 iterations. Fails when a slope exceeds SOAK_MAX_KB_PER_1K (default 256).
# Worker ranks are told apart by fork order (the launcher forks rank 0 first).
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
workers=${SOAK_WORKERS:-4}
iters=${SOAK_ITERATIONS:-10000}
max_slope=${SOAK_MAX_KB_PER_1K:-256}
mkdir -p out/bench
csv=out/bench/soak.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$build/poseidon" train --workers "$workers" --model models/mlp.net --data synthetic \
    --compute emulate --profile models/profiles/mlp-cpu-b64.csv --batch 16 \
    --iterations "$iters" --no-probe --no-eval --report-every 100 --csv "$tmp/rows.csv" \
    --job-out none >"$tmp/log" 2>&1 &
job=$!
start_ns=$(date +%s%N)
elapsed() { awk -v a="$start_ns" -v b="$(date +%s%N)" 'BEGIN {printf "%.1f", (b - a) / 1e9}'; }
echo "rank,seconds,iteration,rss_kb" >"$csv"
pids=()
while kill -0 "$job" 2>/dev/null; do
    sleep 1
    [ ${#pids[@]} -eq "$workers" ] || mapfile -t pids < <(pgrep -P "$job" | sort -n)
    [ ${#pids[@]} -eq "$workers" ] || continue
    t=$(elapsed)
    it=$(tail -1 "$tmp/rows.csv" 2>/dev/null | awk -F, '$2 ~ /^[0-9]+$/ {print $2}')
    for r in "${!pids[@]}"; do
        kb=$(awk '/^VmRSS:/ {print $2}' "/proc/${pids[$r]}/status" 2>/dev/null)
        [ -n "$kb" ] && printf '%d,%s,%s,%s\n' "$r" "$t" "${it:-0}" "$kb" >>"$csv"
    done
done
wait "$job"
rc=$?
if [ $rc -ne 0 ]; then
    echo "bench_soak: the job failed (exit $rc):"; tail -20 "$tmp/log"; exit 1
fi
last=$(tail -1 "$tmp/rows.csv" | cut -d, -f2)
[ "$last" = "$iters" ] || { echo "bench_soak: the job ended at iteration $last of $iters"; exit 1; }
awk -F, -v warm=$((iters / 10)) -v max="$max_slope" -v secs="$(elapsed)" '
    NR > 1 && $3 >= warm {
        r = $1; n[r]++; sx[r] += $3; sy[r] += $4; sxx[r] += $3 * $3; sxy[r] += $3 * $4
        if (!(r in first)) first[r] = $4
        lastkb[r] = $4
    }
    END {
        bad = 0
        for (r = 0; r in n; r++) {
            d = n[r] * sxx[r] - sx[r] * sx[r]
            slope = d > 0 ? (n[r] * sxy[r] - sx[r] * sy[r]) / d * 1000 : 0
            printf "bench_soak: rank %d: %d samples, RSS %d KB -> %d KB, slope %+.1f KB per 1,000 iterations\n",
                   r, n[r], first[r], lastkb[r], slope
            if (slope > max) bad = 1
        }
        printf "bench_soak: %.0f s in all; limit %d KB per 1,000 iterations: %s\n", secs, max,
               bad ? "EXCEEDED" : "flat"
        exit bad
    }' "$csv"
rc=$?
echo "bench_soak: wrote $csv"
exit $rc
