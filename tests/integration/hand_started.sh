#!/usr/bin/env bash
# Liveness of a job whose ranks were started by hand (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
# and --keys, no launcher to reap them), 3 ranks of an emulated MLP:
#   - a rank stopped (SIGSTOP) for 5 s and continued is slow, not dead: the job finishes, exit 0;
#   - a rank killed (SIGKILL: a worker and a PS shard's process) ends the job within 10 s,
#     every survivor naming it;
#   - rank 0 killed (the coordinator's process): every survivor exits within 10 s naming
#     the coordinator.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/integration/lib/common.bash
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
experiments/validate_profile.sh "$build/poseidon" models/mlp.net 16 0.01 >"$tmp/prof.csv" || fail "no profile"
"$build/poseidon" keygen --ranks 3 -o "$tmp/keys" >/dev/null || fail "keygen"

start_job() { # start_job ITERATIONS: ranks 0..2 in the background, pids in pids[]
    local port r
    port=$(free_port) || exit 1
    pids=()
    for r in 0 1 2; do
        RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            "$build/poseidon" train --keys "$tmp/keys" --model models/mlp.net --data synthetic \
            --compute emulate --profile "$tmp/prof.csv" --batch 16 --iterations "$1" \
            --no-eval --no-probe --job-out none --report-every 50 >"$tmp/rank$r.log" 2>&1 &
        pids+=($!)
    done
}
wait_rows() { # wait_rows N: until rank 0 printed a report row of iteration >= N
    for _ in $(seq 300); do
        awk -F, -v n="$1" '$2 + 0 >= n { f = 1 } END { exit !f }' "$tmp/rank0.log" 2>/dev/null && return 0
        sleep 0.1
    done
    tail -n 5 "$tmp"/rank*.log; fail "no report row of iteration $1"
}
wait_all() { # wait_all: sets st to the exit statuses of the ranks, in order (60 s at most)
    local p s
    st=""
    for p in "${pids[@]}"; do
        timeout 60 tail --pid="$p" -f /dev/null || fail "rank with pid $p hung"
        wait "$p"; s=$?
        st="${st:+$st }$s"
    done
}

# slow is not dead: 5 s stopped (longer than the old 3 s limit), then continued
start_job 600
wait_rows 50
kill -STOP "${pids[1]}"
sleep 5
kill -CONT "${pids[1]}"
wait_all
[ "$st" = "0 0 0" ] || { tail -n 5 "$tmp"/rank*.log; fail "a rank stopped for 5 s ended the job (exit statuses: $st)"; }
echo "ok: rank 1 stopped for 5 s, the job finished"

for victim in 1 0; do
    start_job 100000
    wait_rows 50
    t0=$(date +%s.%N)
    kill -9 "${pids[$victim]}"
    wait_all
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    awk "BEGIN { exit !($dt < 10) }" || fail "victim $victim: survivors took ${dt}s (limit 10 s)"
    for r in 0 1 2; do
        [ $r = $victim ] && continue
        if [ $victim = 0 ]; then
            grep -q "the coordinator (node 127.0.0.1, rank 0) closed its connection" "$tmp/rank$r.log" ||
                { tail -n 3 "$tmp/rank$r.log"; fail "rank $r did not name the lost coordinator"; }
        else
            grep -q "job aborted: node .*(rank $victim) closed its connection" "$tmp/rank$r.log" ||
                { tail -n 3 "$tmp/rank$r.log"; fail "rank $r did not name the dead rank $victim"; }
        fi
    done
    echo "ok: rank $victim killed, the others out in ${dt}s naming it (exit statuses: $st)"
done
